from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from _synthesis_run import noisy_pipeline_file, use_hashed_embeddings, write_identified_run
from typer.testing import CliRunner

from sws import tokens
from sws.cli import app
from sws.config import PipelineConfig, Price
from sws.engines.cache import request_key
from sws.llm_calls import shared_engines
from sws.manifests import StageResult, read_manifest
from sws.run_dir import RunDir
from sws.stages import synthesize
from sws.stages.estimate import FEW_SETS, pilot_sets, projection_table, step_scale
from sws.worlds.arith.oracle import OracleEngine


@pytest.fixture
def asked(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """(task, request key) of every request that reaches the oracle, in order."""
    seen: list[tuple[str, str]] = []
    real = OracleEngine.generate

    def generate(self, requests):
        seen.extend((request.task, request_key({}, request)) for request in requests)
        return real(self, requests)

    monkeypatch.setattr(OracleEngine, "generate", generate)
    return seen


def test_the_pilot_projects_each_steps_tokens_within_a_fifth_and_the_real_run_asks_none_of_its_requests(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, asked: list[tuple[str, str]]) -> None:
    use_hashed_embeddings(monkeypatch)
    run = tmp_path / "run"
    write_identified_run(run, n_problems=200)
    pipeline = noisy_pipeline_file(tmp_path, budget=400, estimate_share=0.5)  # estimate.FEW_SETS pilot sets
    before = {path.relative_to(run) for path in run.rglob("*")}
    result = CliRunner().invoke(app, ["synthesize", "--run", str(run), "--config", str(pipeline), "--estimate"])
    assert result.exit_code == 0, result.output
    assert "projected for the whole budget (400 concept sets)" in result.output
    written = {path.relative_to(run).parts[0] for path in run.rglob("*")
               if path.relative_to(run) not in before}
    assert written <= {"estimate", "cache", "config.yaml", ".sws.lock"}  # no table or manifest of the real run
    estimate = json.loads((RunDir(run).estimate.root / "estimate.json").read_text())
    assert (estimate["sets"], estimate["pilot_sets"]) == (400, FEW_SETS)
    pilot = {key for _, key in asked}
    asked.clear()

    result = CliRunner().invoke(app, ["synthesize", "--run", str(run), "--config", str(pipeline)])
    assert result.exit_code == 0, result.output
    real = {key for _, key in asked}
    assert not real & pilot
    cfg = PipelineConfig.model_validate({"synthesize": {"budget": 400}})
    totals = []
    for step in synthesize.steps_on(cfg):
        actual = tokens.total_tokens((read_manifest(run, step) or {}).get("tokens") or {})
        projected = tokens.total_tokens(estimate["steps"][step]["tokens"])
        assert projected == pytest.approx(actual, rel=0.2), step
        totals.append((projected, actual))
    assert sum(projected for projected, _ in totals) == pytest.approx(sum(actual for _, actual in totals), rel=0.1)
    assert tokens.total_tokens(estimate["steps"]["extract"]["tokens"]) == tokens.total_tokens(
        read_manifest(run, "extract")["tokens"])

    # the pilot's requests are the real run's: a fresh run asks what the pilot and the resumed run asked together
    fresh = tmp_path / "fresh"
    write_identified_run(fresh, n_problems=200)
    asked.clear()
    result = CliRunner().invoke(app, ["synthesize", "--run", str(fresh), "--config", str(pipeline)])
    assert result.exit_code == 0, result.output
    needed = {key for _, key in asked}
    assert needed <= real | pilot
    reused = {task for task, key in asked if key in pilot}
    assert reused == {"extract", "generate", "rate", "label"}


def test_a_second_estimate_is_answered_by_the_cache_and_the_scratch_run(tmp_path: Path,
                                                                         asked: list[tuple[str, str]]) -> None:
    write_identified_run(tmp_path)
    cfg = PipelineConfig()
    cfg.synthesize.budget = 20
    with shared_engines():
        first = synthesize.run(cfg, tmp_path, estimate=True).info["estimate"]
    asked.clear()
    with shared_engines():
        again = synthesize.run(cfg, tmp_path, estimate=True).info["estimate"]
    assert asked == []
    assert again["steps"].keys() == first["steps"].keys()
    assert all(again["steps"][step]["tokens"] == first["steps"][step]["tokens"] for step in first["steps"])
    assert all(again["steps"][step]["seconds"] == first["steps"][step]["seconds"] > 0 for step in first["steps"])


def test_pilot_sets_take_a_share_of_each_category_in_the_sets_order() -> None:
    sets = pl.DataFrame({"set_id": [f"set-{index}" for index in range(40)], "category": ["a"] * 30 + ["b"] * 10})
    chosen = pilot_sets(sets, 0.1)
    assert dict(chosen["category"].value_counts().iter_rows()) == {"a": 3, "b": 1}
    assert chosen["set_id"].to_list() == [set_id for set_id in sets["set_id"] if set_id in set(chosen["set_id"])]
    assert set(chosen["set_id"]) <= set(pilot_sets(sets, 0.3)["set_id"])  # a larger share keeps the smaller's sets
    assert pilot_sets(sets, 0.001).height == 1
    assert pilot_sets(sets.head(0), 0.5).height == 0


def test_estimate_with_steps_is_refused(tmp_path: Path) -> None:
    write_identified_run(tmp_path / "run")
    result = CliRunner().invoke(app, ["synthesize", "--run", str(tmp_path / "run"), "--estimate", "--sub-steps", "extract"])
    assert result.exit_code == 2
    assert "leave out --sub-steps" in result.output


def test_the_projection_prices_each_role_and_sums_the_steps() -> None:
    counts = {"prompt": 2_000_000, "completion": 1_000_000, "completions": 10}
    estimate = {"steps": {"extract": {"tokens": {"extractor": counts}, "seconds": 1.0, "pilot_in": 5},
                          "combine": {"tokens": {}, "seconds": 2.0, "pilot_in": None},
                          "label": {"tokens": {"labeler": counts}, "seconds": 3.0, "pilot_in": 4}}}
    table = projection_table(estimate, {"labeler": Price(input=1.0, output=2.0)})
    assert table["step"].to_list() == ["extract", "combine", "label", "total"]
    assert table["cost ($)"].to_list() == [None, None, pytest.approx(4.0), pytest.approx(4.0)]
    total = table.row(-1, named=True)
    assert (total["prompt tokens"], total["completion tokens"], total["seconds"]) == (4_000_000, 2_000_000, 6.0)


def audit_result(labeled: int, audited: int) -> StageResult:
    return StageResult("audit", info={"audited": audited, "funnel": {"in": labeled}})


def test_an_audit_sample_is_projected_as_the_sample_not_scaled_with_the_budget() -> None:
    # The pilot labeled 40 problems and audited 20 of them (audit.sample 20); a budget 10x the pilot's
    # audits 20 again, not 200.
    assert step_scale("audit", audit_result(40, 20), 10.0, 20) == 1.0
    # A pilot that labeled fewer than the sample audited all it had; the whole budget fills the sample.
    assert step_scale("audit", audit_result(5, 5), 10.0, 20) == 4.0
    # Without audit.sample every labeled problem is audited: the audit grows with the budget.
    assert step_scale("audit", audit_result(40, 40), 10.0, None) == 10.0
    assert step_scale("label", StageResult("label"), 10.0, 20) == 10.0
    assert step_scale("extract", StageResult("extract"), 10.0, 20) == 1.0
