"""The math world's fresh problems (co-training's validation tasks): MATH-500 problems of the seed set's
subjects, drawn by the run's seed, none a seed problem nor an excluded one (by `problem_key`)."""

from __future__ import annotations

import random

import polars as pl

from sws.near_duplicates import problem_key
from sws.records import load_preset_benchmark
from sws.world import PROBLEM_SET_SCHEMA

HELD_OUT_BENCHMARK = "math500"


def validation_problems(n_per_category: int, seed: int, seed_problems: pl.DataFrame,
                        exclude: set[str] = frozenset()) -> pl.DataFrame:
    taken = exclude | {problem_key(text) for text in seed_problems["problem"]}
    benchmark = load_preset_benchmark(HELD_OUT_BENCHMARK).select(list(PROBLEM_SET_SCHEMA))
    rows: list[dict[str, str]] = []
    for category in sorted(set(seed_problems["category"])):
        candidates = [row for row in benchmark.filter(pl.col("category") == category).iter_rows(named=True)
                      if problem_key(row["problem"]) not in taken]
        rows += random.Random(f"{seed}:{category}").sample(candidates, min(n_per_category, len(candidates)))
    return pl.DataFrame(rows, schema=PROBLEM_SET_SCHEMA)
