"""The arith world's section of a pipeline file (`arith:`)."""

from __future__ import annotations

from pydantic import Field

from sws.config import Section


class ArithSettings(Section):
    """The built-in arithmetic world: its seed set, held-out sets and the tiny policy's warm start."""

    n_seed_problems: int = Field(600, ge=1)
    # Categories and levels of the seed set the pipeline draws (None: all six categories); the held-out set
    # `arith` draws fresh problems of the same categories and levels (hard ones the policy never solves, drawn
    # beside easy and medium seed problems, would only dilute what it measures).
    seed_categories: list[str] | None = Field(None, min_length=1)
    seed_levels: list[str] = Field(default_factory=lambda: ["easy", "medium", "hard"], min_length=1)
    n_eval_per_category: int = Field(50, ge=1)
    # Fresh problems of the weak problems' families (`weak_like`), drawn over the weak problems in turn: enough
    # that one run measures a family-level skill to about a point and a half.
    n_weak_like: int = Field(1200, ge=1)
    # Fresh problems of every family in the pool `sws select` draws from when select.pool is empty.
    n_pool_problems: int = Field(3000, ge=1)
    # Supervised warm-start steps of the tiny policy (batch 32; about 3 minutes on one idle core).
    bootstrap_steps: int = Field(1200, ge=1)
    # Share of the warm start's carrying additions and borrowing subtractions answered with a column
    # misconception (dropped carry, smaller digit from larger); 0 gives a policy without them.
    misconception_rate: float = Field(0.15, ge=0, le=1)
