"""A seed problem set of the arith world as JSONL, in the layout `sws prepare` reads."""

from __future__ import annotations

import json
from pathlib import Path

from sws.artifacts import StageResult, run_stage, write_text
from sws.config import PipelineConfig
from sws.worlds.arith.families import generate_problems

STAGE = "seed_set"


def seed_set_path(run_dir: Path) -> Path:
    """Where a run's arith seed set lives (the file `sws prepare` normalises into problems.parquet)."""
    return Path(run_dir) / "seed.jsonl"


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


def run(cfg: PipelineConfig, run_dir: Path, force: bool = False) -> StageResult:
    """Write the run's seed set (`arith.n_seed_problems` problems from the run's seed) to `seed_set_path`."""
    path = seed_set_path(run_dir)

    def body() -> StageResult:
        return StageResult(STAGE, rows={"seed": write_seed_set(path, cfg.arith.n_seed_problems, cfg.seed)})

    return run_stage(run_dir, STAGE, config={"n": cfg.arith.n_seed_problems, "seed": cfg.seed}, inputs=[],
                     outputs=[path], body=body, force=force)
