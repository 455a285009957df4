"""The small math co-training pipeline that the `sws run` tests run against the fake Tinker server: two seed
problems, both policies LoRA adapters on one server, the cards labeled by a labeler role, two short steps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from _tinker_server import FakeTinker

from sws.worlds.arith.tokenizer import build_tokenizer

# Every sample the fake server returns, cards and solutions alike: a card whose own answer is 7, ending in
# \boxed{7}.
CARD = "problem: What is 3 + 4 if you add them up?\nanswer: 7\ncategory: Algebra\nSo it is $\\boxed{7}$."
SEEDS = [("Solve $2x + 1 = 5$ for $x$.", "2", "Algebra"), ("What is $5 - 2$ times $3$?", "9", "Prealgebra")]
UNSERVED_LABELER = {"engine": "openai", "model": "labeler", "options": {"base_url": "http://127.0.0.1:9/v1"}}


def fake_tinker(folder: Path) -> FakeTinker:
    """A fake Tinker server naming the arith tokenizer, saved in `folder`, whose every sample is CARD."""
    tokenizer = build_tokenizer()
    tokenizer.save_pretrained(folder)
    card = tokenizer(CARD, add_special_tokens=False)["input_ids"]
    return FakeTinker(folder, card + [tokenizer.eos_token_id])


def tinker_policy(base_url: str, **changes: Any) -> dict[str, Any]:
    """`cotrain.synthesizer` or `cotrain.reasoner`: an adapter on the server at `base_url`, in plain text
    (the arith tokenizer has no chat template)."""
    return {"base_url": base_url, "base_model": "Qwen/Qwen3-0.6B", "lora_rank": 8, "chat_template": False,
            **changes}


def write_pipeline(folder: Path, base_url: str, backend: str = "tinker",
                   labeler: dict[str, Any] | None = None, **cotrain: Any) -> Path:
    """The pipeline file, its `cotrain` section updated by `cotrain`; `labeler`: the labeler role (default: a
    model no server serves, for a test that replaces the engine)."""
    seeds = folder / "seeds.jsonl"
    seeds.write_text("".join(json.dumps({"problem": problem, "answer": answer, "category": category}) + "\n"
                             for problem, answer, category in SEEDS))
    policy = tinker_policy(base_url)
    config = {
        "world": "math", "prepare": {"input": str(seeds)},
        "roles": {"labeler": labeler or UNSERVED_LABELER},
        "synthesize": {"label_samples": 4, "min_consistency": 0.5},
        "cotrain": {"arms": ["cotrained"], "only": True, "steps": 2, "batch_size": 2, "rollouts": 2,
                    "backend": backend, "synthesizer": policy, "reasoner": policy,
                    "validation_per_category": 2, "validation_rollouts": 2, **cotrain},
    }
    path = folder / "pipeline.yaml"
    path.write_text(json.dumps(config))
    return path
