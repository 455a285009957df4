"""The arith world's selection pool: fresh problems of every family for `sws select --pool`, none of them a seed
problem or a problem of the held-out evaluation set (by `problem_key`, the duplicate rule of prepare and mix), so
selecting from it never trains on what the evaluation measures."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl

from sws.atomic_files import write_jsonl
from sws.config import PipelineConfig
from sws.near_duplicates import problem_key
from sws.worlds.arith.families import generate_problems
from sws.worlds.arith.held_out import heldout_problems

# The pool's problems come from a seed stream neither the seed set nor the held-out sets use.
POOL_SEED_OFFSET = 15485863


def pool_rows(cfg: PipelineConfig, seed_problems: pl.DataFrame, n: int) -> list[dict[str, Any]]:
    """Up to `n` pool problems (fields id, problem, answer, category, level, family)."""
    held_out = heldout_problems(cfg.world_settings.n_eval_per_category, cfg.seed, seed_problems,
                                cfg.world_settings.seed_levels)
    taken = {problem_key(text) for text in [*seed_problems["problem"], *held_out["problem"]]}
    drawn = generate_problems(2 * n, seed=cfg.seed + POOL_SEED_OFFSET)
    fresh = []
    for problem in drawn:
        key = problem_key(problem.problem)
        if key not in taken and len(fresh) < n:  # small families (the times table) repeat: each problem once
            taken.add(key)
            fresh.append(problem)
    return [{"id": f"pool-{cfg.seed}-{index:06d}", "problem": p.problem, "answer": p.answer, "category": p.category,
             "level": p.level, "family": p.family}
            for index, p in enumerate(fresh)]


def write_pool(path: Path, cfg: PipelineConfig, seed_problems: pl.DataFrame, n: int) -> int:
    """Write `pool_rows` as JSONL; return the count."""
    rows = pool_rows(cfg, seed_problems, n)
    write_jsonl(Path(path), rows)
    return len(rows)
