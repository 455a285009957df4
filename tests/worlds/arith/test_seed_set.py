import json

import polars as pl
from typer.testing import CliRunner

from sws.cli import app
from sws.worlds.arith import CATEGORIES, LEVELS, solve


def sws(*args: str):
    return CliRunner().invoke(app, list(args))


def test_seed_set_command_writes_a_file_prepare_reads(tmp_path):
    seed_file = tmp_path / "seed.jsonl"
    result = sws("world", "seed-set", "--out", str(seed_file), "--n", "60", "--seed", "3")
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in seed_file.read_text().splitlines()]
    assert len(rows) == 60 and len({row["id"] for row in rows}) == 60
    assert {row["category"] for row in rows} == set(CATEGORIES) and {row["level"] for row in rows} == set(LEVELS)
    assert all(solve(row["problem"]).answer == row["answer"] for row in rows)

    run = tmp_path / "run"
    result = sws("prepare", "--input", str(seed_file), "--run", str(run))
    assert result.exit_code == 0, result.output
    problems = pl.read_parquet(run / "problems.parquet")
    assert problems.height == 60
    assert set(problems["category"]) == set(CATEGORIES)


def test_seed_set_is_reproducible_from_its_seed(tmp_path):
    for name in ("a", "b"):
        assert sws("world", "seed-set", "--out", str(tmp_path / f"{name}.jsonl"), "--n", "30").exit_code == 0
    assert (tmp_path / "a.jsonl").read_text() == (tmp_path / "b.jsonl").read_text()


def test_an_unknown_category_is_one_line_exit_2(tmp_path):
    result = sws("world", "seed-set", "--out", str(tmp_path / "s.jsonl"), "--categories", "addition,division")
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        "error: unknown arith category 'division'; choose from " + ", ".join(CATEGORIES)]
    assert not (tmp_path / "s.jsonl").exists()


def test_accuracy_of_a_missing_model_is_one_line_exit_2(tmp_path):
    result = sws("world", "accuracy", "--model", str(tmp_path / "nope"))
    assert result.exit_code == 2, result.output
    assert len(result.stderr.strip().splitlines()) == 1 and "nope" in result.stderr



def test_a_negative_count_or_seed_is_refused_and_writes_nothing(tmp_path):
    for option, value in (("--n", "-5"), ("--n", "0"), ("--seed", "-1")):
        result = sws("world", "seed-set", "--out", str(tmp_path / "s.jsonl"), option, value)
        assert result.exit_code == 2 and "greater than or equal to" in result.output
    assert not (tmp_path / "s.jsonl").exists()
