import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
import yaml
from word_world import seed_rows

from sws import runner
from sws.arms import arm
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.manifests import read_manifest
from sws.stages import train as stage
from sws.tables import read_table, write_table
from sws.training.rewards import RewardBatch, register_reward
from sws.worlds.arith import build_policy, generate_problems

SWS = str(Path(sys.executable).parent / "sws")


@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory):
    return build_policy(tmp_path_factory.mktemp("policy") / "tiny")


def quick_config(tiny_policy, **train):
    return PipelineConfig.model_validate({"train": {
        "init_model": str(tiny_policy), "initial_steps": 3, "augmented_steps": 2, "batch_size": 2,
        "num_generations": 4, "max_completion_length": 8, "save_steps": 2, **train,
    }})


def write_seed_problems(run_dir, name="problems", n=16):
    problems = generate_problems(n, seed=1)
    write_table(run_dir, name, pl.DataFrame({
        "problem_id": [f"{name}-{index}" for index in range(n)],
        "problem": [problem.problem for problem in problems],
        "answer": [problem.answer for problem in problems],
        "category": [problem.category for problem in problems],
        "source": ["seed"] * n,
    }))


def test_augmented_and_baseline_need_the_initial_checkpoint(tmp_path, tiny_policy):
    write_seed_problems(tmp_path)
    write_seed_problems(tmp_path, "augmented")

    for kind in ("augmented", "baseline"):
        with pytest.raises(UserError, match="sws train initial"):
            runner.run(stage.STAGES[kind], quick_config(tiny_policy), tmp_path)
    assert not (tmp_path / "train").exists()


def test_outside_the_arith_world_the_initial_model_must_be_named(tmp_path):
    write_seed_problems(tmp_path)
    cfg = PipelineConfig.model_validate({"world": "math"})

    with pytest.raises(UserError, match="'train.init_model' is empty"):
        runner.run(stage.STAGES["initial"], cfg, tmp_path)


def test_the_baseline_trains_as_long_as_the_augmented_run_unless_told_otherwise(tiny_policy):
    assert arm("baseline").steps(quick_config(tiny_policy, augmented_steps=7)) == 7
    assert arm("baseline").steps(quick_config(tiny_policy, baseline_steps=5)) == 5
    assert arm("initial").steps(quick_config(tiny_policy, initial_steps=9)) == 9
    assert arm("selected").steps(quick_config(tiny_policy, augmented_steps=7, baseline_steps=5)) == 7


@pytest.mark.slow
def test_the_selected_arm_trains_from_initial_on_seed_and_selected_only_as_long_as_augmented(tmp_path, tiny_policy):
    write_seed_problems(tmp_path)
    write_seed_problems(tmp_path, "selected_mix", n=20)
    cfg = quick_config(tiny_policy, baseline_steps=3)
    runner.run(stage.STAGES["initial"], cfg, tmp_path)

    result = runner.run(stage.STAGES["selected"], cfg, tmp_path)

    assert result.info["steps"] == 2 and read_table(tmp_path, "train/selected/curve")["step"].to_list() == [1, 2]
    assert set(read_table(tmp_path, "train/selected/rollouts")["problem_id"]) <= {
        f"selected_mix-{index}" for index in range(20)}
    assert (tmp_path / "train" / "selected" / "final" / "model.safetensors").is_file()
    assert any(path.endswith("train/initial/final") for path in read_manifest(tmp_path, "train_selected")["inputs"])


@pytest.mark.slow
def test_initial_then_augmented_and_baseline_runs_write_their_artifacts(tmp_path, tiny_policy):
    write_seed_problems(tmp_path)
    write_seed_problems(tmp_path, "augmented", n=20)
    cfg = quick_config(tiny_policy)

    initial = runner.run(stage.STAGES["initial"], cfg, tmp_path)
    skipped = runner.run(stage.STAGES["initial"], cfg, tmp_path)
    augmented = runner.run(stage.STAGES["augmented"], cfg, tmp_path)
    baseline = runner.run(stage.STAGES["baseline"], cfg, tmp_path)

    rollouts = read_table(tmp_path, "rollouts")
    assert rollouts["step"].to_list() == [1, 1, 2, 2, 3, 3]
    assert set(rollouts["problem_id"]) <= {f"problems-{index}" for index in range(16)}
    assert skipped.skipped and not initial.skipped
    for kind, result in (("augmented", augmented), ("baseline", baseline)):
        assert (tmp_path / "train" / kind / "final" / "model.safetensors").is_file()
        assert read_table(tmp_path, f"train/{kind}/curve")["step"].to_list() == [1, 2]
        assert result.info["steps"] == 2
    assert set(read_table(tmp_path, "train/augmented/rollouts")["problem_id"]) <= {
        f"augmented-{index}" for index in range(20)
    }
    assert set(read_table(tmp_path, "train/baseline/rollouts")["problem_id"]) <= {
        f"problems-{index}" for index in range(16)
    }


@pytest.mark.slow
def test_augmented_and_baseline_side_by_side_train_exactly_as_one_after_the_other(tmp_path, tiny_policy):
    first = tmp_path / "one-after-the-other"
    write_seed_problems(first)
    write_seed_problems(first, "augmented", n=20)
    runner.run(stage.STAGES["initial"], quick_config(tiny_policy), first)
    second = tmp_path / "side-by-side"
    shutil.copytree(first, second)

    stage.train_group("continuations", quick_config(tiny_policy, side_by_side=False), first)
    stage.train_group("continuations", quick_config(tiny_policy, side_by_side=True), second)

    for kind in ("baseline", "augmented"):
        assert read_table(second, f"train/{kind}/rollouts").equals(read_table(first, f"train/{kind}/rollouts"))
        assert "train " + kind in (second / "train" / kind / "log.txt").read_text()
        assert json.loads((second / "train" / kind / "progress.json").read_text())["step"] == 2
    rerun = stage.train_group("continuations", quick_config(tiny_policy, side_by_side=True), second)
    assert all(result.skipped for result in rerun)


@pytest.mark.slow
def test_a_killed_training_run_resumes_and_logs_every_rollout_exactly_once(tmp_path, tiny_policy):
    steps = 30  # a tiny step takes about 0.1 s: the kill must land well before the end
    run_dir = tmp_path / "run"
    write_seed_problems(run_dir)
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(yaml.safe_dump(quick_config(tiny_policy, initial_steps=steps, save_steps=3)
                                       .model_dump(mode="json")))
    checkpoints = run_dir / "train" / "initial" / "checkpoints"

    process = subprocess.Popen([SWS, "--quiet", "train", "initial", "--run", str(run_dir), "--config", str(pipeline)])
    deadline = time.monotonic() + 300
    while not list(checkpoints.glob("checkpoint-*/trainer_state.json")) and process.poll() is None \
            and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.15)  # into the next steps, whose rollouts are not checkpointed yet
    process.send_signal(signal.SIGKILL)
    process.wait()
    # Only the two newest checkpoints are kept, so which ones survive depends on the machine's speed.
    assert list(checkpoints.glob("checkpoint-*/trainer_state.json"))
    assert not (run_dir / "train" / "initial" / "final").exists()

    subprocess.run([SWS, "--quiet", "train", "initial", "--run", str(run_dir), "--config", str(pipeline)], check=True)

    rollouts = read_table(run_dir, "rollouts")
    assert rollouts.group_by("step").len().sort("step").rows() == [(step, 2) for step in range(1, steps + 1)]
    assert rollouts.select("step", "problem_id").is_duplicated().sum() == 0
    manifest = read_manifest(run_dir, "train_initial")
    assert manifest["info"]["resumed_from_step"] >= 3
    assert (run_dir / "train" / "initial" / "final" / "model.safetensors").is_file()
    assert read_table(run_dir, "train/initial/curve")["step"].to_list() == list(range(1, steps + 1))
    assert json.loads((run_dir / "train" / "initial" / "job.json").read_text())["steps"] == steps


def test_the_cli_rejects_an_unknown_training_kind(tmp_path):
    result = subprocess.run([SWS, "train", "final", "--run", str(tmp_path)], capture_output=True, text=True)

    assert result.returncode == 2
    assert result.stderr.strip() == ("error: training kind 'final' is not known; use one of: initial, baseline, "
                                     "augmented, untargeted, selected, random_selected, oracle_family, "
                                     "oracle_family_large")


@register_reward("a_quarter")
def a_quarter(batch: RewardBatch) -> list[float]:
    """A tiny reward for the tests: a quarter for every completion, whatever it says."""
    return [0.25] * len(batch.completions)


def test_a_run_trains_with_the_registered_reward_and_logs_the_worlds_verdicts(tmp_path, tiny_policy, verifier_calls):
    write_table(tmp_path, "problems", pl.DataFrame(seed_rows(4)).rename({"id": "problem_id"}).with_columns(
        source=pl.lit("seed")))
    cfg = PipelineConfig.model_validate({"world": "wordsums", "train": {
        "init_model": str(tiny_policy), "reward": "a_quarter", "initial_steps": 2, "batch_size": 2,
        "num_generations": 2, "max_completion_length": 8}})

    runner.run(stage.STAGES["initial"], cfg, tmp_path)

    assert read_table(tmp_path, "train/initial/curve")["reward"].to_list() == [0.25, 0.25]
    rollouts = read_table(tmp_path, "rollouts")
    assert rollouts["n"].to_list() == [2] * 4 and rollouts["n_correct"].sum() == 0  # an untrained policy
    assert sum(call[0] == "extract" for call in verifier_calls()) == 2 * 2 * 2


def test_a_reward_nobody_registered_is_one_line_naming_the_field(tmp_path, tiny_policy):
    write_seed_problems(tmp_path)
    with pytest.raises(UserError, match="field 'train.reward' is 'nowhere', which no reward is registered as; "
                                        "use one of: .*a_quarter.*correct"):
        runner.run(stage.STAGES["initial"], quick_config(tiny_policy, reward="nowhere"), tmp_path)
    assert not (tmp_path / "train").exists()
