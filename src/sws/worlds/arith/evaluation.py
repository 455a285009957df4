"""Greedy accuracy of a policy on fresh arith problems, per category and per level."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from rich.table import Table

from sws.config import EngineConfig
from sws.grading import grade_completions, shared_pool
from sws.world import get_world
from sws.worlds.arith.families import CATEGORIES, LEVELS, ArithProblem, generate_problems
from sws.worlds.arith.prompt import policy_prompt

MAX_ANSWER_TOKENS = 16


def graded_problems(model_dir: Path, n_per_category: int, seed: int) -> list[tuple[ArithProblem, bool]]:
    """`n_per_category` problems of each category (levels mixed evenly), each with whether greedy decoding solves it;
    a problem whose grading ran out of time is left out."""
    from sws.engines import Request, make_engine

    problems = generate_problems(n_per_category * len(CATEGORIES), seed)
    engine = make_engine(EngineConfig(engine="hf", model=str(model_dir), temperature=0.0, max_tokens=MAX_ANSWER_TOKENS,
                                      options={"batch_size": 256}))
    try:
        requests = [Request(**policy_prompt(problem.problem), temperature=0.0, max_tokens=MAX_ANSWER_TOKENS)
                    for problem in problems]
        completions = engine.generate(requests)
    finally:
        engine.close()
    verdicts = grade_completions([problem.answer for problem in problems], [samples[0].text for samples in completions],
                                 shared_pool(get_world("arith").verifier))
    return [(problem, verdict) for problem, verdict in zip(problems, verdicts, strict=True) if verdict is not None]


def accuracy_by(graded: list[tuple[ArithProblem, bool]], *keys: str) -> dict[tuple[str, ...], float]:
    """Share solved per value of the given ArithProblem fields, e.g. accuracy_by(graded, "category", "level")."""
    solved: dict[tuple[str, ...], list[bool]] = defaultdict(list)
    for problem, correct in graded:
        solved[tuple(getattr(problem, key) for key in keys)].append(correct)
    return {group: sum(values) / len(values) for group, values in solved.items()}


def category_accuracy(model_dir: Path, n_per_category: int = 60, seed: int = 12345) -> dict[str, float]:
    """Greedy accuracy per category on `n_per_category` fresh problems each (levels mixed evenly)."""
    by_category = accuracy_by(graded_problems(model_dir, n_per_category, seed), "category")
    return {category: by_category[(category,)] for category in CATEGORIES}


def accuracy_table(graded: list[tuple[ArithProblem, bool]], title: str) -> Table:
    """A rich table of accuracy: one row per category, one column per level and one for all levels."""
    by_level = accuracy_by(graded, "category", "level")
    by_category = accuracy_by(graded, "category")
    counts = {category: sum(p.category == category for p, _ in graded) for category in CATEGORIES}
    table = Table(title=title)
    table.add_column("category")
    for level in LEVELS:
        table.add_column(level, justify="right")
    table.add_column("all", justify="right")
    table.add_column("n", justify="right")
    for category in CATEGORIES:
        cells = [f"{by_level[(category, level)]:.0%}" if (category, level) in by_level else "-" for level in LEVELS]
        table.add_row(category, *cells, f"{by_category.get((category,), 0.0):.0%}", str(counts[category]))
    return table
