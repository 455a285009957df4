"""The tiny two-round arith pipeline the rounds end-to-end tests run, sized by each test."""


def two_rounds(seed_problems: int, eval_per_category: int, budget: int, steps: int) -> dict:
    return {
        "seed": 0, "world": "arith", "rounds": 2,
        "arith": {"n_seed_problems": seed_problems, "seed_levels": ["easy", "medium"],
                  "n_eval_per_category": eval_per_category, "bootstrap_steps": 40},
        "roles": {"policy": {"engine": "hf", "model": "", "temperature": 1.0, "options": {"batch_size": 64}}},
        "identify": {"max_acc": 0.75, "max_slope": 1.0},
        "synthesize": {"budget": budget, "levels": ["easy", "medium"], "label_samples": 2, "adapt_rounds": 0,
                       "shard_size": 4},
        "filter": {"band": [0.0, 1.0], "rollouts": 2, "shard_size": 4},
        "train": {"initial_steps": steps, "augmented_steps": steps, "batch_size": 4, "num_generations": 2,
                  "save_steps": 1},
        "eval": {"k": 1, "weak_k": 2, "shard_size": 8},
    }
