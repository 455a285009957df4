from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from _synthesis_run import ScriptedEngine, scripted_role, use_engines
from word_world import RULES, canonical, problem_text

from sws import runner
from sws.config import EngineConfig, PipelineConfig
from sws.errors import UserError
from sws.stages import audit, score, synthesize
from sws.tables import read_parquet, read_table, rejected_path, write_table

NO_ANSWER = "I cannot finish this."


def boxed(answer: str) -> str:
    return f"Working.\nSo the answer is $\\boxed{{{answer}}}$."


def write_labeled(run_dir: Path, labels: dict[str, str]) -> None:
    n = len(labels)
    write_table(run_dir, "labeled", pl.DataFrame({
        "syn_id": [f"syn-{index}" for index in range(n)], "category": ["arith"] * n,
        "concepts": [["arithmetic"]] * n, "level": ["medium"] * n, "problem": list(labels),
        "answer": list(labels.values()), "consistency": [1.0] * n, "answers": [[answer] for answer in labels.values()],
        "student_agreement": [None] * n,
    }, schema_overrides={"student_agreement": pl.Float64}))


def auditor_config(samples: int = 4, **settings: object) -> PipelineConfig:
    config = PipelineConfig()
    config.roles.auditor = scripted_role("auditor")
    config.audit.samples = samples
    for name, value in settings.items():
        setattr(config.audit, name, value)
    return config


def test_a_label_the_auditor_contradicts_is_quarantined_with_both_answers(tmp_path: Path, monkeypatch) -> None:
    samples = {
        "agrees": [boxed("0.5"), boxed("\\frac{1}{2}"), boxed("1/2"), boxed("3")],
        "contradicts": [boxed("53")] * 3 + [boxed("103")],
        "half": [boxed("7")] * 2 + [boxed("8")] * 2,
        "silent": [NO_ANSWER] * 4,
    }
    write_labeled(tmp_path, {"agrees": "1/2", "contradicts": "103", "half": "7", "silent": "9"})
    engine = ScriptedEngine(lambda request, k: samples[request.fields["problem"]][k])
    use_engines(monkeypatch, {"auditor": engine})
    result = runner.run(audit.STAGE, auditor_config(), tmp_path)
    kept = read_table(tmp_path, "audited")
    rejected = read_parquet(rejected_path(tmp_path, "audited"))
    # 2 of 4 disagreeing is not more than max_disagreement 0.5; no stated answer is no evidence.
    assert kept["problem"].to_list() == ["agrees", "half", "silent"]
    assert kept["audit_agreement"].to_list() == [0.75, 0.5, None]
    assert rejected.select("problem", "answer", "audit_answer", "reject_reason").rows() == [
        ("contradicts", "103", "53", "audit_disagrees")]
    assert all("103" not in message["content"] for request in engine.requests for message in request.messages)
    assert result.info["funnel"]["rejected"] == {"audit_disagrees": 1}
    assert result.info["disagrees"] == 1 and result.info["judged"] == 3


def test_audit_sample_audits_a_seeded_subset_and_passes_the_rest(tmp_path: Path, monkeypatch) -> None:
    labels = {f"problem {index}": str(index) for index in range(10)}
    write_labeled(tmp_path, labels)
    engine = ScriptedEngine(lambda request, k: boxed("-1"))
    use_engines(monkeypatch, {"auditor": engine})
    result = runner.run(audit.STAGE, auditor_config(sample=4), tmp_path)
    kept = read_table(tmp_path, "audited")
    assert len(engine.requests) == 4 and result.info["audited"] == 4
    assert kept.height == 6 and not any(kept["audited"].to_list())
    rate = result.info["wrong_label_rate"]
    assert rate["rate"] == 1.0 and 0.4 < rate["low"] < 0.6 and rate["high"] == 1.0
    assert audit.audit_sample(list(labels), 4, 0) == audit.audit_sample(list(labels), 4, 0)


def test_wrong_label_rate_interval_matches_wilson() -> None:
    rate = audit.wrong_label_rate(10, 100)
    assert rate["rate"] == pytest.approx(0.1)
    assert rate["low"] == pytest.approx(0.0552, abs=1e-3) and rate["high"] == pytest.approx(0.1744, abs=1e-3)


def test_the_audit_runs_only_with_an_auditor(tmp_path: Path) -> None:
    config = PipelineConfig()
    assert not audit.is_on(config) and score.source(config, 0) == ("labeled",)
    assert "audit" not in synthesize.steps_on(config)
    config.roles.auditor = EngineConfig(engine="oracle", model="arith-oracle")
    assert audit.is_on(config) and score.source(config, 2) == ("adapt/round-2/audited",)
    config.audit.enabled = False
    assert not audit.is_on(config)
    forced = PipelineConfig()
    forced.audit.enabled = True
    write_labeled(tmp_path, {"a": "1"})
    with pytest.raises(UserError, match="roles.auditor"):
        runner.run(audit.STAGE, forced, tmp_path)


def test_a_worlds_verifier_compares_the_auditors_answers_with_the_labels(tmp_path: Path, verifier_calls) -> None:
    right, wrong = problem_text("addition", 20, 4), problem_text("subtraction", 30, 9)
    write_labeled(tmp_path, {right: "twenty-four", wrong: "twenty-two"})
    # The world's rule-based auditor answers right, every other sample as "Twenty Four".
    config = PipelineConfig.model_validate({"world": "wordsums", "roles": {"auditor": RULES}, "audit": {"samples": 4}})

    runner.run(audit.STAGE, config, tmp_path)

    assert read_table(tmp_path, "audited").select("problem", "audit_agreement").rows() == [(right, 1.0)]
    rejected = read_parquet(rejected_path(tmp_path, "audited"))
    assert rejected.select("answer", "audit_agreement").rows() == [("twenty-two", 0.0)]
    assert canonical(rejected["audit_answer"][0]) == "twenty one"
    calls = verifier_calls()
    assert ["equivalent", "twenty-four", "Twenty Four"] in calls  # the label first, as it is the reference
    assert ["equivalent", "twenty-two", "Twenty One"] in calls
