"""A seed problem set of the arith world as JSONL, in the layout `sws prepare` reads."""

from __future__ import annotations

import json
from pathlib import Path

from sws.artifacts import write_text
from sws.worlds.arith.families import generate_problems


def write_seed_set(
    path: Path, n: int, seed: int, categories: list[str] | None = None, levels: list[str] | None = None
) -> int:
    """Write `n` problems (fields id, problem, answer, category, level, family, concepts); return the count."""
    problems = generate_problems(n, seed, categories, levels)
    lines = [
        json.dumps({"id": f"arith-{seed}-{index:05d}", "problem": p.problem, "answer": p.answer,
                    "category": p.category, "level": p.level, "family": p.family, "concepts": p.concepts})
        for index, p in enumerate(problems)
    ]
    write_text(Path(path), "".join(line + "\n" for line in lines))
    return len(lines)
