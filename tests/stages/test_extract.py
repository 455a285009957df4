from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from _synthesis_run import ScriptedEngine, scripted_role, use_engines, write_identified_run

from sws import runner
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.stages import extract
from sws.tables import read_parquet, read_table, rejected_path, table_path
from sws.worlds.arith import solve


def test_oracle_concepts_for_every_weak_problem(tmp_path: Path) -> None:
    problems = write_identified_run(tmp_path)
    result = runner.run(extract.STAGE, PipelineConfig(), tmp_path)
    table = read_table(tmp_path, "concepts")
    weak_ids = read_table(tmp_path, "weakness").filter(pl.col("weak"))["problem_id"].to_list()
    assert table["problem_id"].to_list() == weak_ids
    assert result.info["funnel"] == {"step": "extract", "in": len(weak_ids), "kept": len(weak_ids), "rejected": {},
                                     "truncated": 0, "completions": len(weak_ids)}
    text_of = dict(zip(problems["problem_id"], problems["problem"], strict=True))
    for problem_id, listed in zip(table["problem_id"], table["concepts"], strict=True):
        assert 1 <= len(listed) <= 5 and len(set(listed)) == len(listed)
        # the oracle lists the problem's true concepts first, then pads with related ones
        true_concepts = set(solve(text_of[problem_id]).concepts)
        assert set(listed) <= true_concepts if len(true_concepts) >= 5 else true_concepts <= set(listed)


def test_unparseable_outputs_go_to_the_sidecar_with_the_raw_text(tmp_path: Path, monkeypatch) -> None:
    write_identified_run(tmp_path)
    refusal = "I'm sorry, I can't list concepts for this."
    engine = ScriptedEngine(lambda request, _: refusal if "mod" in request.fields["problem"]
                            else '["Multiplication", "place value"]')
    use_engines(monkeypatch, {"scripted": engine})
    config = PipelineConfig()
    config.roles.extractor = scripted_role("scripted")
    runner.run(extract.STAGE, config, tmp_path)
    kept = read_table(tmp_path, "concepts")
    rejected = read_parquet(rejected_path(tmp_path, "concepts"))
    assert rejected.height > 0 and kept.height > 0
    assert set(rejected["reject_reason"]) == {"unparsed"}
    assert set(rejected["raw"]) == {refusal}
    assert all("mod" in problem for problem in rejected["problem"])
    assert all(listed == ["multiplication", "place value"] for listed in kept["concepts"].to_list())
    assert engine.closed
    request = engine.requests[0]
    assert request.task == "extract" and set(request.fields) == {"problem", "category", "k"}
    assert request.fields["problem"] in request.messages[0]["content"]


def test_no_weak_problems_gives_empty_outputs_and_calls_no_engine(tmp_path: Path, monkeypatch, capsys) -> None:
    write_identified_run(tmp_path, weak_categories=())
    engine = ScriptedEngine(lambda request, _: pytest.fail("no request expected"))
    use_engines(monkeypatch, {"arith-oracle": engine})
    result = runner.run(extract.STAGE, PipelineConfig(), tmp_path)
    assert read_table(tmp_path, "concepts").height == 0
    assert result.info["funnel"]["in"] == 0
    assert "no weak problems" in capsys.readouterr().err
    assert not engine.requests


def test_missing_weakness_names_the_command_that_makes_it(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="sws identify"):
        runner.run(extract.STAGE, PipelineConfig(), tmp_path)
    assert not table_path(tmp_path, "concepts").exists()


def test_weak_problem_missing_from_problems_is_a_user_error(tmp_path: Path) -> None:
    problems = write_identified_run(tmp_path)
    weak_id = read_table(tmp_path, "weakness").filter(pl.col("weak"))["problem_id"][0]
    problems.filter(pl.col("problem_id") != weak_id).write_parquet(table_path(tmp_path, "problems"))
    with pytest.raises(UserError, match=f"problem_id '{weak_id}' is not in problems.parquet"):
        runner.run(extract.STAGE, PipelineConfig(), tmp_path)


def test_current_manifest_skips_and_a_crash_resumes_from_the_request_cache(tmp_path: Path, monkeypatch) -> None:
    write_identified_run(tmp_path)
    config = PipelineConfig()
    config.synthesize.shard_size = 10
    config.roles.extractor = scripted_role("flaky")
    calls: list[str] = []

    def respond(request, _):
        calls.append(request.fields["problem"])
        if len(calls) == 25:
            raise RuntimeError("engine died")
        return '["multiplication"]'

    use_engines(monkeypatch, {"flaky": ScriptedEngine(respond)})
    with pytest.raises(RuntimeError, match="engine died"):
        runner.run(extract.STAGE, config, tmp_path)
    assert not table_path(tmp_path, "concepts").exists()
    n_weak = read_table(tmp_path, "weakness")["weak"].sum()
    runner.run(extract.STAGE, config, tmp_path)
    # the two finished shards (20 requests) came from the cache; only the rest were asked again
    assert len(calls) == 25 + (n_weak - 20)
    assert read_table(tmp_path, "concepts").height == n_weak
    assert runner.run(extract.STAGE, config, tmp_path).skipped


def test_concepts_with_control_characters_are_rejected(tmp_path: Path, monkeypatch) -> None:
    write_identified_run(tmp_path)
    engine = ScriptedEngine(lambda request, _: '["carry\\u0000ing", "place value"]' if "mod" in request.fields["problem"]
                            else '["multiplication", "\\u202eplace value"]' if "*" in request.fields["problem"]
                            else '["addition"]')
    use_engines(monkeypatch, {"scripted": engine})
    config = PipelineConfig()
    config.roles.extractor = scripted_role("scripted")
    runner.run(extract.STAGE, config, tmp_path)
    rejected = read_parquet(rejected_path(tmp_path, "concepts"))
    assert rejected.height > 0 and set(rejected["reject_reason"]) == {"control_characters"}
    assert all(listed == ["addition"] for listed in read_table(tmp_path, "concepts")["concepts"].to_list())
