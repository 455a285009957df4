"""A seed problem set of the arith world as JSONL, in the layout `sws prepare` reads."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sws.atomic_files import write_jsonl
from sws.worlds.arith.families import generate_problems


def seed_set_rows(n: int, seed: int, categories: list[str] | None = None, levels: list[str] | None = None
                  ) -> list[dict[str, Any]]:
    """`n` problems (fields id, problem, answer, category, level, family, concepts)."""
    return [{"id": f"arith-{seed}-{index:05d}", "problem": p.problem, "answer": p.answer, "category": p.category,
             "level": p.level, "family": p.family, "concepts": p.concepts}
            for index, p in enumerate(generate_problems(n, seed, categories, levels))]


def write_seed_set(
    path: Path, n: int, seed: int, categories: list[str] | None = None, levels: list[str] | None = None
) -> int:
    """Write `seed_set_rows` as JSONL; return the count."""
    rows = seed_set_rows(n, seed, categories, levels)
    write_jsonl(Path(path), rows)
    return len(rows)
