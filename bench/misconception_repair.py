"""Can GRPO repair the arith world's column misconceptions on its own? (the demo's premise, measured alone)

Usage: `python bench/misconception_repair.py [--rate 0.6] [--steps 60] [--seed 0]`. Builds (or reuses) the
warm-started policy with `arith.misconception_rate` = RATE, then measures on 240 fresh carrying additions and
borrowing subtractions (easy and medium, the demo's seed levels): the share of 8 samples at temperature 1 that
are right, and the share that are the misconceived answer. It then trains GRPO with the demo's settings
(16 problems × 8 completions, lr 1e-4) for STEPS steps on the other problems of the same families (none of the
measured ones, each seen once before any repeats), and measures again. The other categories are measured too (greedy, 50
fresh problems each), so a repair that costs the strong skills shows.
"""

from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path

import polars as pl
import torch

from sws import ui
from sws.config import EngineConfig, TrainConfig
from sws.engines import Request, make_engine
from sws.grading import extract_answer
from sws.training import TrainJob, train
from sws.world import get_world
from sws.worlds.arith.bootstrap import bootstrap_policy
from sws.worlds.arith.evaluation import accuracy_by, graded_problems
from sws.worlds.arith.expressions import parse
from sws.worlds.arith.families import FAMILIES, ArithProblem, expression_text, sample_problem
from sws.worlds.arith.misconceptions import misconceived_answer

SAMPLES = 8
MEASURED = 240


def misconception_pool(seed: int, levels: tuple[str, ...] = ("easy", "medium")) -> list[ArithProblem]:
    """The distinct addition and subtraction problems of `levels` that a column misconception applies to."""
    rng = random.Random(seed)
    families = [f for f in FAMILIES if f.level in levels and f.category in ("addition", "subtraction")]
    found: dict[str, ArithProblem] = {}
    for _ in range(20_000):
        problem = sample_problem(rng.choice(families), rng)
        if misconceived_answer(parse(expression_text(problem))) is not None:
            found.setdefault(problem.problem, problem)
    return sorted(found.values(), key=lambda problem: problem.problem)


def sampled_rates(model_dir: Path, problems: list[ArithProblem]) -> tuple[float, float]:
    """(share right, share misconceived) over SAMPLES samples per problem at temperature 1."""
    engine = make_engine(EngineConfig(engine="hf", model=str(model_dir), temperature=1.0, max_tokens=16,
                                      options={"batch_size": 512}))
    try:
        completions = engine.generate([Request(**get_world("arith").policy_prompt(p.problem), n=SAMPLES, temperature=1.0,
                                               max_tokens=16, seed=index) for index, p in enumerate(problems)])
    finally:
        engine.close()
    right = wrong_way = 0
    for problem, samples in zip(problems, completions, strict=True):
        misconceived = str(misconceived_answer(parse(expression_text(problem))))
        answers = [extract_answer(sample.text) for sample in samples]
        right += sum(answer == problem.answer for answer in answers)
        wrong_way += sum(answer == misconceived for answer in answers)
    total = SAMPLES * len(problems)
    return right / total, wrong_way / total


def category_line(model_dir: Path) -> str:
    by_category = accuracy_by(graded_problems(model_dir, 50, seed=12345), "category")
    return ", ".join(f"{category} {accuracy:.0%}" for (category,), accuracy in sorted(by_category.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=0.6)
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    policy = bootstrap_policy(seed=args.seed, misconception_rate=args.rate)
    pool = misconception_pool(seed=args.seed)
    rng = random.Random(args.seed)
    rng.shuffle(pool)
    # The measured problems are never trained on; the rest are, in random order, repeated only once used up.
    measured, rest = pool[:MEASURED], pool[MEASURED:]
    training = [rest[index % len(rest)] for index in range(16 * args.steps)]
    print(f"{len(pool)} distinct problems: {len(measured)} measured, {len(rest)} to train on", flush=True)
    right, wrong_way = sampled_rates(policy, measured)
    print(f"warm start (rate {args.rate}): right {right:.1%}, misconceived {wrong_way:.1%} of samples; "
          f"greedy by category: {category_line(policy)}", flush=True)
    ui.set_quiet(True)
    with tempfile.TemporaryDirectory() as scratch:
        problems = pl.DataFrame({"problem_id": [f"t{index}" for index in range(len(training))],
                                 "problem": [p.problem for p in training], "answer": [p.answer for p in training]})
        out_dir = Path(scratch) / "repair"
        job = TrainJob(name="repair", problems=problems, init_model=policy, out_dir=out_dir, steps=args.steps,
                       world="arith", seed=args.seed, identity="repair", config_file=out_dir / "config.yaml")
        outcome = train(job, TrainConfig(batch_size=16, num_generations=8, learning_rate=1e-4, save_steps=10_000))
        curve = outcome.curve["reward"].to_list()
        right_after, wrong_after = sampled_rates(outcome.final_dir, measured)
        print(f"after {args.steps} GRPO steps: right {right_after:.1%}, misconceived {wrong_after:.1%} of samples "
              f"(training reward first 10 steps {sum(curve[:10]) / 10:.1%}, last 10 {sum(curve[-10:]) / 10:.1%}); "
              f"greedy by category: {category_line(outcome.final_dir)}")


if __name__ == "__main__":
    main()
