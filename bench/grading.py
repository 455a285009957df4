"""Grading throughput: pairs per second through one grading process, a GradingPool of one process per CPU, and
(with Ray installed) the Ray executor's grading actors, one per CPU, each owning one grading process.

Pairs are real MATH answers that are not plain integers, against a boxed copy and a changed value, so every
pair goes through math-verify (none takes the identical-string or integer fast path). Process start-up is
excluded from every timing: a step on Ray keeps its workers for all its calls, so the Ray row warms them with a
first call inside one `shared_engines()` block and times the second. Goal: a pool reaches 0.8 x cores the single process's rate.

    .venv/bin/python bench/grading.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import tempfile
import time
from pathlib import Path

from sws.grading import GradingPool
from sws.records import DATA_DIR

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


def grade_pairs(pairs: list[list[str]], pool: GradingPool) -> list[bool]:
    """The grading body the Ray actors run: (gold, pred) pairs as they are."""
    return pool.grade([(gold, pred) for gold, pred in pairs])


def ray_pairs_per_second(pairs: list[tuple[str, str]]) -> float | None:
    try:
        import ray
    except ImportError:
        return None
    from sws.config import PipelineConfig
    from sws.executors.ray_executor import RayExecutor
    from sws.llm_calls import shared_engines

    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    with tempfile.TemporaryDirectory() as tmp:
        executor = RayExecutor(PipelineConfig.model_validate({"executor": {"kind": "ray"}}), Path(tmp))
        with shared_engines():
            executor.map_graded(grade_pairs, pairs[:os.cpu_count() * 2])  # start and warm every worker
            started = time.perf_counter()
            executor.map_graded(grade_pairs, pairs)
            seconds = time.perf_counter() - started
    ray.shutdown()
    return len(pairs) / seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="times the 600 pairs are graded in one call")
    args = parser.parse_args()
    from rich.console import Console
    from rich.table import Table

    from sws import ui

    ui.set_quiet(True)
    pairs = benchmark_pairs() * args.repeat
    cores = os.cpu_count()
    single = pairs_per_second(1, pairs)
    rows = [("one process", single), (f"GradingPool of {cores}", pairs_per_second(cores, pairs))]
    ray_rate = ray_pairs_per_second(pairs)
    if ray_rate is not None:
        rows.append((f"Ray: {cores} workers x 1 grading process", ray_rate))
    table = Table(title=f"grading {len(pairs)} math-verify pairs on {cores} cores")
    for column in ("grader", "pairs/s", "vs one process", "goal"):
        table.add_column(column, justify="right")
    for name, rate in rows:
        table.add_row(name, f"{rate:.0f}", f"{rate / single:.2f}x", "" if rate is single else f">= {0.8 * cores:.1f}x")
    Console().print(table)


if __name__ == "__main__":
    main()
