"""Grading throughput: pairs per second through a 2-worker GradingPool against a single worker process.

Pairs are real MATH answers that are not plain integers, against a boxed copy and a changed value, so every
pair goes through math-verify (none takes the identical-string or integer fast path). Worker start-up is excluded
from both timings.
"""

from __future__ import annotations

import json
import random
import re
import time

from sws.grading import GradingPool
from sws.stages.prepare import DATA_DIR

MATH_TRAIN = DATA_DIR / "math_train.json"
N_ANSWERS = 300


def benchmark_pairs() -> list[tuple[str, str]]:
    answers = [row["answer"] for row in json.loads(MATH_TRAIN.read_text())
               if row["answer"] and not re.fullmatch(r"-?\d+", row["answer"])]
    sample = random.Random(0).sample(answers, N_ANSWERS)
    changed = [re.sub(r"\d", lambda digit: str((int(digit.group()) + 1) % 10), answer, count=1) for answer in sample]
    return [(answer, f"\\boxed{{{answer}}}") for answer in sample] + list(zip(sample, changed, strict=True))


def pairs_per_second(workers: int, pairs: list[tuple[str, str]]) -> float:
    with GradingPool(workers=workers) as pool:
        pool.grade(pairs[:workers * 2])  # start and warm every worker
        started = time.perf_counter()
        pool.grade(pairs)
        return len(pairs) / (time.perf_counter() - started)


def main() -> None:
    pairs = benchmark_pairs()
    single = pairs_per_second(1, pairs)
    pooled = pairs_per_second(2, pairs)
    print(f"grading {len(pairs)} pairs: single worker {single:.0f} pairs/s, pool of 2 {pooled:.0f} pairs/s, "
          f"ratio {pooled / single:.2f}x")


if __name__ == "__main__":
    main()
