"""The arith world's held-out problems: fresh problems of the seed set's categories and levels that no seed or
training problem is."""

from __future__ import annotations

import polars as pl

from sws.near_duplicates import problem_key
from sws.world import PROBLEM_SET_SCHEMA
from sws.worlds.arith.families import generate_problems

# Held-out problems come from seed streams the seed set never uses.
HELDOUT_SEED_OFFSET = 7919
# Candidates drawn per held-out problem wanted: enough to replace those that are seed or training problems.
HELDOUT_DRAWS = 4


def heldout_problems(n_per_category: int, seed: int, seed_problems: pl.DataFrame, levels: list[str],
                     exclude: set[str] = frozenset()) -> pl.DataFrame:
    """`n_per_category` fresh problems of each seed category at `levels` (the seed set's, mixed evenly), none of
    them a seed problem or one whose `problem_key` is in `exclude`."""
    taken = exclude | {problem_key(text) for text in seed_problems["problem"]}
    rows = []
    for category in sorted(set(seed_problems["category"])):
        candidates = generate_problems(HELDOUT_DRAWS * n_per_category, seed=seed + HELDOUT_SEED_OFFSET,
                                       categories=[category], levels=levels)
        fresh = [p for p in candidates if problem_key(p.problem) not in taken][:n_per_category]
        rows += [{"problem_id": f"heldout-{category}-{i}", "problem": p.problem, "answer": p.answer,
                  "category": category} for i, p in enumerate(fresh)]
    return pl.DataFrame(rows, schema=PROBLEM_SET_SCHEMA)
