"""`sws train` with `train.trainer: verl`, run through on CPU by a stand-in interpreter (`fake_verl.py`)."""

import json
import shutil
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

from sws import runner
from sws.cli import app
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.manifests import read_manifest
from sws.stages import train as stage
from sws.tables import read_table, table_path, write_table

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.fixture
def fake_python(tmp_path: Path) -> Path:
    """An interpreter path whose `-m verl...` runs are `fake_verl.py`; their argv land in `argv.jsonl`."""
    env = tmp_path / "verl-env"
    env.mkdir()
    shutil.copy(Path(__file__).parent / "fake_verl.py", env / "fake_verl.py")
    python = env / "python"
    python.write_text(f'#!/bin/sh\nexec {sys.executable} {env / "fake_verl.py"} "$@"\n')
    python.chmod(0o755)
    return python


def calls(python: Path) -> list[list[str]]:
    return [json.loads(line) for line in (python.parent / "argv.jsonl").read_text().splitlines()]


def verl_config(python: Path, **train) -> PipelineConfig:
    return PipelineConfig.model_validate({"world": "math", "train": {
        "trainer": "verl", "init_model": "Qwen/Qwen2.5-0.5B", "initial_steps": 3, "augmented_steps": 2,
        "batch_size": 2, "num_generations": 4, "save_steps": 2, "verl": {"python": str(python)}, **train,
    }})


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    write_table(run, "problems", pl.read_ndjson(FIXTURES / "math_problems.jsonl"))
    return run


@pytest.mark.parametrize("dump_format", ["legacy", "v1"])
def test_initial_then_continuations_leave_the_same_artifacts_as_trl(run_dir, fake_python, monkeypatch, dump_format):
    if dump_format == "v1":  # no problem_id in the dump: problems are found by prompt text and answer
        monkeypatch.setenv("FAKE_VERL_DUMP", "v1")
    problems = read_table(run_dir, "problems")
    write_table(run_dir, "augmented", problems.vstack(problems.with_columns(
        problem_id=pl.col("problem_id") + "-syn", problem="Restated: " + pl.col("problem"), source=pl.lit("syn"))))
    cfg = verl_config(fake_python)

    runner.run(stage.STAGES["initial"], cfg, run_dir)

    rollouts = read_table(run_dir, "rollouts")
    ids = problems["problem_id"].to_list()
    assert rollouts.sort("step", "problem_id").rows() == sorted(
        (step, ids[((step - 1) * 2 + k) % 7], 4, 2) for step in (1, 2, 3) for k in (0, 1))
    curve = read_table(run_dir, "train/initial/curve")
    assert curve.select("step", "reward", "loss").rows() == [(1, 0.5, 0.1), (2, 0.5, 0.2), (3, 0.5, 0.3)]
    final = run_dir / "train" / "initial" / "final"
    assert json.loads((final / "config.json").read_text())["merged_from"].endswith("checkpoints/global_step_3/actor")

    for kind in ("baseline", "augmented"):
        runner.run(stage.STAGES[kind], cfg, run_dir)
        launch = (run_dir / "train" / kind / "launch.sh").read_text()
        assert f"actor_rollout_ref.model.path={final}" in launch
        assert "trainer.total_training_steps=2" in launch
        assert read_table(run_dir, f"train/{kind}/curve")["step"].to_list() == [1, 2]
        assert (run_dir / "train" / kind / "final" / "model.safetensors").is_file()
    assert set(read_table(run_dir, "train/augmented/rollouts")["problem_id"]) <= set(
        read_table(run_dir, "augmented")["problem_id"])
    trainer_calls = [call for call in calls(fake_python) if "verl.trainer.main_ppo" in call]
    assert len(trainer_calls) == 3 and all("trainer.use_v1=False" in call for call in trainer_calls)


def test_the_cli_trains_initial_and_a_rerun_launches_nothing(run_dir, fake_python, tmp_path):
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(yaml.safe_dump(verl_config(fake_python).model_dump(mode="json")))

    first = CliRunner().invoke(app, ["--quiet", "train", "initial", "--run", str(run_dir), "--config", str(pipeline)])
    again = CliRunner().invoke(app, ["--quiet", "train", "initial", "--run", str(run_dir), "--force"])

    assert first.exit_code == 0 and again.exit_code == 0, first.output + again.output
    assert read_table(run_dir, "rollouts")["n"].sum() == 3 * 2 * 4
    assert (run_dir / "train" / "initial" / "final" / "config.json").is_file()
    assert "step:3 - actor/pg_loss:0.3" in (run_dir / "train" / "initial" / "log.txt").read_text()
    merges = [call for call in calls(fake_python) if "verl.model_merger" in call]
    assert merges[0][:6] == ["-m", "verl.model_merger", "merge", "--backend", "fsdp", "--local_dir"]
    assert read_manifest(run_dir, "train_initial")["info"]["steps"] == 3


def test_a_killed_run_is_resumed_by_verl_and_a_finished_one_is_not_launched_again(run_dir, fake_python):
    cfg = verl_config(fake_python)
    runner.run(stage.STAGES["initial"], cfg, run_dir)
    (run_dir / "manifests" / "train_initial.json").unlink()  # as if sws died after verl finished

    result = runner.run(stage.STAGES["initial"], cfg, run_dir)

    assert sum("verl.trainer.main_ppo" in call for call in calls(fake_python)) == 1
    assert result.info["resumed_from_step"] == 3


def test_a_missing_verl_interpreter_is_one_line_naming_make_install_verl(run_dir, tmp_path):
    cfg = verl_config(tmp_path / "nowhere" / "python")
    with pytest.raises(UserError, match=r"'train.verl.python': .*nowhere/python not found; run `make install-verl`"):
        runner.run(stage.STAGES["initial"], cfg, run_dir)
    assert not table_path(run_dir, "rollouts").exists()


def test_a_failing_verl_run_names_its_log_and_writes_no_artifacts(run_dir, fake_python, monkeypatch):
    monkeypatch.setenv("FAKE_VERL_EXIT", "3")
    with pytest.raises(UserError, match=r"verl exited with code 3 .*log.txt"):
        runner.run(stage.STAGES["initial"], verl_config(fake_python), run_dir)
    assert not table_path(run_dir, "rollouts").exists()
    assert not (run_dir / "train" / "initial" / "final").exists()


def test_dumps_naming_no_known_problem_stop_before_anything_is_written(run_dir, fake_python, monkeypatch):
    monkeypatch.setenv("FAKE_VERL_DUMP", "unknown")
    with pytest.raises(UserError, match=r"24 of 24 response lines match no problem .*'user What is 1\+1\? assistant'"):
        runner.run(stage.STAGES["initial"], verl_config(fake_python), run_dir)
    assert not table_path(run_dir, "rollouts").exists()
    assert not table_path(run_dir, "train/initial/curve").exists()
    assert not (run_dir / "train" / "initial" / "final").exists()


def test_verl_runs_never_train_side_by_side(fake_python):
    assert not stage.side_by_side(verl_config(fake_python, side_by_side=True), 2)


def test_the_online_filter_runs_augmented_training_on_verls_group_filter_and_counts_its_drops(
        run_dir, fake_python, monkeypatch):
    monkeypatch.setenv("FAKE_VERL_DUMP", "v1")  # the v1 trainer, which verl's group filter needs
    problems = read_table(run_dir, "problems")
    write_table(run_dir, "augmented", problems)
    cfg = verl_config(fake_python, online_filter=(0.25, 0.75))
    runner.run(stage.STAGES["initial"], cfg, run_dir)
    runner.run(stage.STAGES["augmented"], cfg, run_dir)
    runner.run(stage.STAGES["baseline"], cfg, run_dir)

    initial, augmented, baseline = [call for call in calls(fake_python) if "verl.trainer.main_ppo" in call]
    assert "trainer.use_v1=False" in initial and "algorithm.filter_groups.enable=True" not in initial
    # both continuing arms filter alike, on the same (v1) trainer
    for continued in (augmented, baseline):
        assert {"trainer.use_v1=True", "algorithm.filter_groups.enable=True",
                "algorithm.filter_groups.metric=acc"} <= set(continued)
    assert read_table(run_dir, "train/augmented/curve")["groups_dropped"].to_list() == [1, 2]
    assert read_table(run_dir, "train/initial/curve")["groups_dropped"].to_list() == [0, 0, 0]
    assert read_table(run_dir, "train/augmented/rollouts")["problem_id"].is_in(problems["problem_id"].implode()).all()
