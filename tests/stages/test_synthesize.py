from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from _synthesis_run import NOISE, write_identified_run
from typer.testing import CliRunner

from sws.artifacts import read_manifest, read_parquet, read_table, rejected_path, table_path
from sws.cli import app
from sws.config import EngineConfig, PipelineConfig
from sws.errors import UserError
from sws.funnel import read_funnel
from sws.stages import synthesize
from sws.worlds.arith import solve

OUTPUTS = ("concepts", "concept_sets", "synthetic", "rated", "labeled")
FILTERS = ("concepts", "synthetic", "rated", "labeled")


def noisy_pipeline_file(tmp_path: Path, budget: int = 60) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump({
        "roles": {
            "generator": {"engine": "oracle", "model": "arith-oracle", "options": NOISE},
            "judges": [{"engine": "oracle", "model": "arith-oracle", "options": {"judge_error": 0.1}}],
            "labeler": {"engine": "oracle", "model": "arith-oracle", "options": {"labeler_error": 0.2}},
        },
        "synthesize": {"budget": budget, "set_size": 3},
    }))
    return path


def test_cli_runs_every_step_and_prints_the_funnel(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_identified_run(run)
    result = CliRunner().invoke(app, ["synthesize", "--run", str(run), "--config", str(noisy_pipeline_file(tmp_path))])
    assert result.exit_code == 0, result.output
    assert "synthesis funnel" in result.output
    labeled = read_table(run, "labeled")
    assert labeled.height > 0
    for problem, answer in zip(labeled["problem"], labeled["answer"], strict=True):
        assert solve(problem).kind == "ok"
        assert answer is not None
    funnel = read_funnel(run, list(synthesize.STEPS))
    assert [row.step for row in funnel] == list(synthesize.STEPS)
    for previous, row in zip(funnel, funnel[1:], strict=False):
        if row.step != "combine":
            assert row.rows_in == previous.kept
    for row in funnel:
        assert row.rows_in == row.kept + sum(row.rejected.values())
    for name in FILTERS:
        rejected = read_parquet(rejected_path(run, name))
        assert rejected["reject_reason"].null_count() == 0
    synthetic_rejected = set(read_parquet(rejected_path(run, "synthetic"))["reject_reason"])
    assert {"multi_part", "proof", "true_false"} <= synthetic_rejected
    assert read_manifest(run, "label")["info"]["funnel"]["kept"] == labeled.height


def test_rerun_skips_every_current_step(tmp_path: Path) -> None:
    write_identified_run(tmp_path)
    config = PipelineConfig()
    config.synthesize.budget = 10
    config.synthesize.set_size = 3
    first = synthesize.run(config, tmp_path)
    again = synthesize.run(config, tmp_path)
    assert again.info["funnel"] == first.info["funnel"]
    assert all(read_manifest(tmp_path, step) is not None for step in synthesize.STEPS)
    # a changed setting reruns its step and the steps after it (their inputs changed)
    config.roles.judges = [EngineConfig(options={"judge_error": 1.0})]
    changed = synthesize.run(config, tmp_path, steps=["rate", "label"])
    assert changed.info["funnel"][0]["kept"] < first.info["funnel"][3]["kept"]


def test_steps_run_alone_and_in_pipeline_order(tmp_path: Path) -> None:
    write_identified_run(tmp_path)
    config = PipelineConfig()
    config.synthesize.budget = 10
    result = synthesize.run(config, tmp_path, steps=["combine", "extract"])
    assert [row["step"] for row in result.info["funnel"]] == ["extract", "combine"]
    assert table_path(tmp_path, "concept_sets").exists() and not table_path(tmp_path, "synthetic").exists()


def test_no_weak_problems_ends_with_a_message_and_empty_outputs(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_identified_run(run, weak_categories=())
    result = CliRunner().invoke(app, ["synthesize", "--run", str(run)])
    assert result.exit_code == 0, result.output
    assert "no weak problems" in result.output
    for name in OUTPUTS:
        assert read_table(run, name).height == 0


def test_missing_upstream_artifact_names_the_command(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["synthesize", "--run", str(tmp_path)])
    assert result.exit_code == 2
    assert "error:" in result.output and "sws identify" in result.output
    assert "Traceback" not in result.output


def test_unknown_step_is_rejected_before_anything_is_written(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["synthesize", "--run", str(tmp_path), "--steps", "extract,dedupe"])
    assert result.exit_code == 2
    assert "unknown step 'dedupe'" in result.output
    assert not any(tmp_path.iterdir())


def test_parse_steps() -> None:
    assert synthesize.parse_steps("label, extract") == ["extract", "label"]
    assert synthesize.parse_steps(None) == list(synthesize.STEPS)
    with pytest.raises(UserError):
        synthesize.parse_steps(" , ")


HF_CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }}{% endfor %}\n"


@pytest.mark.slow
def test_every_step_runs_on_the_hf_engine_with_the_tiny_policy(tmp_path: Path) -> None:
    """The tiny policy cannot play a teacher, so nearly everything it writes is rejected; every step must still
    run on it, and every rejection must carry a reason."""
    from sws.worlds.arith.policy import build_policy

    run = tmp_path / "run"
    write_identified_run(run, n_problems=30)
    policy = build_policy(tmp_path / "policy", seed=0)
    hf = EngineConfig(engine="hf", model=str(policy), max_tokens=24, temperature=1.0,
                      options={"chat_template": HF_CHAT_TEMPLATE})
    config = PipelineConfig()
    config.synthesize.budget = 6
    config.synthesize.set_size = 3
    config.synthesize.label_samples = 2
    config.synthesize.weak_to_strong = True
    config.synthesize.student_samples = 2
    config.roles.policy = hf
    # first every role on hf: the chain must hold even when a step rejects everything
    config.roles.extractor = config.roles.generator = config.roles.labeler = hf
    config.roles.judges = [hf]
    synthesize.run(config, run)
    # then each role on hf in turn, with oracle upstream so that it has real input; "policy" is the
    # weak-to-strong student, asked only about problems the (oracle) teacher labeled consistently
    oracle = EngineConfig()
    funnels = {}
    for role in ("extractor", "generator", "judges", "labeler", "policy"):
        for other in ("extractor", "generator", "labeler"):
            setattr(config.roles, other, hf if other == role else oracle)
        config.roles.judges = [hf if role == "judges" else oracle]
        config.synthesize.weak_to_strong = role == "policy"
        funnels[role] = {row["step"]: row for row in synthesize.run(config, run).info["funnel"]}
    assert funnels["extractor"]["extract"]["kept"] < funnels["extractor"]["extract"]["in"]
    assert funnels["generator"]["generate"]["in"] > 0 and funnels["generator"]["generate"]["kept"] == 0
    assert funnels["judges"]["rate"]["in"] > 0
    assert funnels["labeler"]["label"]["in"] > 0
    assert funnels["policy"]["label"]["rejected"].get("student_disagrees", 0) > 0
    for name in FILTERS:
        assert read_parquet(rejected_path(run, name))["reject_reason"].null_count() == 0
    for row in read_funnel(run, list(synthesize.STEPS)):
        assert row.rows_in == row.kept + sum(row.rejected.values())
