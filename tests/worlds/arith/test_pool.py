import json
import random
from pathlib import Path

import polars as pl
from typer.testing import CliRunner

from sws.cli import app
from sws.config import PipelineConfig
from sws.near_duplicates import problem_key
from sws.tables import write_table
from sws.worlds.arith import generate_problems, solve
from sws.worlds.arith.families import FAMILIES, sample_problem
from sws.worlds.arith.pool import write_pool
from sws.worlds.arith.world import WORLD

FAMILY_DRAWS = 400


def seed_problems(n: int = 300) -> pl.DataFrame:
    drawn = generate_problems(n, seed=0)
    return pl.DataFrame({"problem_id": [f"s{i}" for i in range(n)], "problem": [p.problem for p in drawn],
                         "answer": [p.answer for p in drawn], "category": [p.category for p in drawn],
                         "source": ["arith"] * n})


def test_the_pool_covers_every_family_and_holds_no_seed_or_heldout_problem(tmp_path: Path) -> None:
    cfg = PipelineConfig()
    seeds = seed_problems()
    count = write_pool(tmp_path / "pool.jsonl", cfg, seeds, 2000)
    rows = [json.loads(line) for line in (tmp_path / "pool.jsonl").read_text().splitlines()]
    assert count == len(rows) == 2000
    held_out = WORLD.heldout_set("arith", cfg, seeds)
    taken = {problem_key(text) for text in [*seeds["problem"], *held_out["problem"]]}
    rng = random.Random(0)
    # The one-digit times table has 26 problems once commuted twins are one: the seed and held-out sets take all.
    left = {family.name for family in FAMILIES
            if any(problem_key(sample_problem(family, rng).problem) not in taken for _ in range(FAMILY_DRAWS))}
    assert {row["family"] for row in rows} == left and len(left) >= len(FAMILIES) - 1
    keys = [problem_key(row["problem"]) for row in rows]
    assert not set(keys) & taken and len(set(keys)) == len(keys)
    assert all(solve(row["problem"]).answer == row["answer"] for row in rows)


def test_the_command_reads_the_runs_seed_set(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_table(run, "problems", seed_problems(60))
    result = CliRunner().invoke(app, ["world", "pool", "--run", str(run), "--out", str(tmp_path / "pool.jsonl"),
                                      "--n", "50"])
    assert result.exit_code == 0, result.output
    assert len((tmp_path / "pool.jsonl").read_text().splitlines()) == 50
    missing = CliRunner().invoke(app, ["world", "pool", "--run", str(tmp_path / "none"), "--out",
                                       str(tmp_path / "p.jsonl")])
    assert missing.exit_code == 2 and "run `sws prepare" in missing.output
