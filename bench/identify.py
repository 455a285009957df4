"""`sws identify` on 10 M rollout rows: the vectorised stage against a per-problem Python loop with numpy.polyfit.

The log imitates a GRPO run: 100,000 problems over 100 epochs, each epoch a fresh shuffle cut into batches (one
step per batch), 8 rollouts per problem and step, accuracies drifting per problem. The loop baseline (group rows in
a dict, sort by step, `np.polyfit`) runs on a subset of the problems and is extrapolated per problem; both compute
the same table, which the script checks on that subset before printing the ratio.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import polars as pl

from sws.config import IdentifyConfig, PipelineConfig
from sws.stages import identify
from sws.tables import write_table

CATEGORIES = ("algebra", "counting_probability", "geometry", "intermediate_algebra", "number_theory",
              "prealgebra", "precalculus")
ROLLOUTS_PER_RECORD = 8


def synthetic_run(n_problems: int, n_epochs: int, batch_size: int, seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(seed)
    ids = pl.Series("problem_id", [f"{value:016x}" for value in rng.integers(0, 2**63, n_problems)])
    problems = pl.DataFrame({"problem_id": ids, "category": rng.choice(CATEGORIES, n_problems)}).select(
        "problem_id", problem=pl.format("Problem {}", "problem_id"), answer=pl.lit("1"), category="category",
        source=pl.lit("bench"),
    )
    order = np.concatenate([rng.permutation(n_problems) for _ in range(n_epochs)])
    epoch = np.repeat(np.arange(n_epochs), n_problems)
    step = np.arange(order.size) // batch_size
    start, drift = rng.beta(0.6, 0.9, n_problems), rng.normal(0.0, 0.004, n_problems)
    p_correct = np.clip(start[order] + drift[order] * epoch, 0, 1)
    rollouts = pl.DataFrame({
        "step": step.astype(np.int64), "problem_id": ids.gather(order),
        "n": np.full(order.size, ROLLOUTS_PER_RECORD, dtype=np.int64),
        "n_correct": rng.binomial(ROLLOUTS_PER_RECORD, p_correct).astype(np.int64),
    })
    return problems, rollouts


def vectorised(problems: pl.DataFrame, rollouts: pl.DataFrame, rule: IdentifyConfig) -> pl.DataFrame:
    return identify.weakness_table(problems, identify.record_stats(rollouts), rule)


def loop_weakness(rollouts: pl.DataFrame, rule: IdentifyConfig) -> dict[str, tuple[float, float, bool]]:
    """The straightforward version: gather each problem's records, sort by step, fit a line per problem."""
    history: dict[str, list[tuple[int, float]]] = defaultdict(list)
    for step, problem_id, n, n_correct in rollouts.iter_rows():
        history[problem_id].append((step, n_correct / n))
    result = {}
    for problem_id, records in history.items():
        accs = [acc for _, acc in sorted(records, key=lambda record: record[0])]
        slope = float(np.polyfit(np.arange(len(accs)), accs, 1)[0]) if len(accs) > 1 else 0.0
        max_acc = max(accs)
        weak = len(accs) >= rule.min_records and max_acc <= rule.max_acc and slope <= rule.max_slope
        result[problem_id] = (max_acc, slope, weak)
    return result


def timed(function, *args):
    """The result, wall seconds and CPU seconds of this process (other jobs on the machine inflate only wall)."""
    started, cpu_started = time.perf_counter(), time.process_time()
    value = function(*args)
    return value, time.perf_counter() - started, time.process_time() - cpu_started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=int, default=100_000)
    parser.add_argument("--epochs", type=int, default=100)
    parser.add_argument("--loop-problems", type=int, default=3_000, help="problems the loop baseline runs on")
    args = parser.parse_args()
    rule = IdentifyConfig()
    problems, rollouts = synthetic_run(args.problems, args.epochs, batch_size=1024)
    print(f"identify bench: {rollouts.height:,} rollout rows, {problems.height:,} problems, "
          f"{rollouts['step'].max() + 1} steps")

    subset_ids = problems["problem_id"].head(args.loop_problems)
    subset = rollouts.filter(pl.col("problem_id").is_in(subset_ids.implode()))
    vectorised(problems, subset, rule)  # the first call pays one-off imports; not part of the scaling
    weakness, vector_seconds, vector_cpu = timed(vectorised, problems, rollouts, rule)
    loop, loop_seconds, loop_cpu = timed(loop_weakness, subset, rule)
    scale = problems.height / subset_ids.len()

    check = weakness.filter(pl.col("problem_id").is_in(subset_ids.implode()))
    for row in check.iter_rows(named=True):
        max_acc, slope, weak = loop[row["problem_id"]]
        assert row["max_acc"] == max_acc and abs(row["slope"] - slope) < 1e-9, row["problem_id"]
        assert row["weak"] == weak or abs(slope) < 1e-9, row["problem_id"]  # polyfit leaves ~1e-17 on flat lines

    with tempfile.TemporaryDirectory() as run_dir:
        write_table(Path(run_dir), "problems", problems)
        write_table(Path(run_dir), "rollouts", rollouts)
        _, stage_seconds, stage_cpu = timed(identify.run, PipelineConfig(), Path(run_dir))

    print(f"vectorised weakness table: {vector_seconds:.2f} s wall, {vector_cpu:.2f} s CPU; whole stage with "
          f"Parquet I/O and plots: {stage_seconds:.2f} s wall, {stage_cpu:.2f} s CPU; "
          f"{int(weakness['weak'].sum()):,} weak problems")
    print(f"per-problem loop + np.polyfit: {loop_seconds:.2f} s wall on {subset_ids.len():,} problems "
          f"-> {loop_seconds * scale:.1f} s wall, {loop_cpu * scale:.1f} s CPU extrapolated to {problems.height:,}")
    print(f"ratio (loop / vectorised): {loop_seconds * scale / vector_seconds:.1f}x wall, "
          f"{loop_cpu * scale / vector_cpu:.1f}x CPU")


if __name__ == "__main__":
    main()
