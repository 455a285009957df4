"""Difficulty-adaptive regeneration inside `sws filter`, on a small arith run with the oracle as teacher and a
scripted policy whose accuracy falls with the number of multi-digit numbers in a problem, as a small real
policy's does."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
from _synthesis_run import ScriptedEngine, use_engines, write_identified_run

from sws.config import PipelineConfig
from sws.stages import filter as filter_stage
from sws.tables import read_parquet, read_table, rejected_path, write_table
from sws.worlds.arith import solve
from sws.worlds.arith.families import FAMILY_BY_NAME, sample_problem

ROLLOUTS = 8


def multi_digit_numbers(problem: str) -> int:
    return sum(len(number) > 1 for number in re.findall(r"\d+", problem))


def solved_samples(problem: str) -> int:
    """Of 8 samples: all with one-digit numbers only, half with one multi-digit number, none with more."""
    return (ROLLOUTS, ROLLOUTS // 2, 0)[min(multi_digit_numbers(problem), 2)]


def scripted_policy(monkeypatch) -> ScriptedEngine:
    def respond(request, index):
        problem = request.fields["problem"]
        answer = int(solve(problem).answer)
        return f"\\boxed{{{answer if index < solved_samples(problem) else answer + 1}}}"

    engine = ScriptedEngine(respond)
    use_engines(monkeypatch, {"scripted-policy": engine})
    return engine


def write_round_zero(run_dir: Path) -> pl.DataFrame:
    """Generated and labeled problems of round 0: two-digit borrowing subtractions the policy never solves,
    one-digit ones it always does."""
    import random

    rng = random.Random(5)
    problems = [sample_problem(FAMILY_BY_NAME[name], rng) for name in ["sub_borrow"] * 6 + ["sub_one_digit"] * 3]
    labeled = pl.DataFrame({
        "syn_id": [f"syn-{index}" for index in range(len(problems))],
        "category": [problem.category for problem in problems],
        "concepts": [problem.concepts for problem in problems], "level": [problem.level for problem in problems],
        "problem": [problem.problem for problem in problems], "answer": [problem.answer for problem in problems],
        "consistency": [1.0] * len(problems),
    })
    write_table(run_dir, "synthetic", labeled.drop("answer", "consistency"))
    write_table(run_dir, "labeled", labeled)
    return labeled


def adapt_config(rounds: int, harder: bool) -> PipelineConfig:
    return PipelineConfig.model_validate({
        "roles": {"policy": {"engine": "oracle", "model": "scripted-policy"}},
        "synthesize": {"adapt_rounds": rounds, "adapt_harder": harder, "label_samples": 4},
        "filter": {"band": [0.125, 0.875], "rollouts": ROLLOUTS},
    })


def test_problems_never_solved_come_back_easier_and_the_band_keeps_them(tmp_path: Path, monkeypatch) -> None:
    write_identified_run(tmp_path)
    labeled = write_round_zero(tmp_path)
    scripted_policy(monkeypatch)

    result = filter_stage.run(adapt_config(rounds=1, harder=True), tmp_path)

    requests = read_table(tmp_path, "adapt/round-1/concept_sets")
    never = set(labeled.filter(pl.col("problem").str.contains("-") & (pl.col("level") == "hard"))["syn_id"])
    easier = requests.filter(pl.col("direction") == "easier")
    assert set(easier["source_syn_id"]) == never
    assert set(requests.filter(pl.col("direction") == "harder")["source_syn_id"]) == set(labeled["syn_id"]) - never
    kept = read_table(tmp_path, "filtered")
    assert set(kept["round"]) == {1}  # round 0 had nothing in the band; round 1 added the easier problems
    adapted = kept.join(read_table(tmp_path, "adapt/round-1/synthetic").select("syn_id", "set_id"), on="syn_id")
    adapted = adapted.join(easier.select("set_id", "source_problem"), on="set_id")
    assert adapted.height >= 4
    for problem, source in adapted.select("problem", "source_problem").iter_rows():
        assert multi_digit_numbers(problem) < multi_digit_numbers(source)
        assert "subtraction with borrowing" in solve(problem).concepts
    rejected = read_parquet(rejected_path(tmp_path, "filtered"))
    assert set(rejected.filter(pl.col("round") == 0)["syn_id"]) == set(labeled["syn_id"])
    assert result.info["kept_per_round"] == {"0": 0, "1": kept.height}


def test_a_rerun_skips_every_round_and_no_rounds_is_one_pass(tmp_path: Path, monkeypatch) -> None:
    write_identified_run(tmp_path)
    write_round_zero(tmp_path)
    policy = scripted_policy(monkeypatch)
    filter_stage.run(adapt_config(rounds=2, harder=False), tmp_path)
    asked = len(policy.requests)
    first = read_table(tmp_path, "filtered")

    again = filter_stage.run(adapt_config(rounds=2, harder=False), tmp_path)

    assert again.skipped and len(policy.requests) == asked
    assert read_table(tmp_path, "filtered").equals(first)
    assert (tmp_path / "manifests" / "adapt" / "round-2" / "score.json").is_file()
    single = filter_stage.run(adapt_config(rounds=0, harder=False), tmp_path)
    assert single.info["kept_per_round"] == {"0": 0} and read_table(tmp_path, "filtered").height == 0
