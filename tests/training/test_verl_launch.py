"""The verl launch `sws train` writes: overrides checked against verl's own Hydra config, data, reward, launch.sh."""

import json
import subprocess
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from sws.cli import app
from sws.config import load_config
from sws.errors import UserError
from sws.presets import PRESET_DIR
from sws.tables import write_table
from sws.training import TrainJob
from sws.training.rewards import correct
from sws.training.verl_launch import MANAGED_KEYS, VerlLayout, verl_overrides, write_launch

REPO = Path(__file__).parents[2]
PRESETS = sorted(path for path in PRESET_DIR.glob("*.yaml") if load_config(path).train.trainer == "verl")
VERL_PYTHON = REPO / ".venv-verl" / "bin" / "python"
needs_verl = pytest.mark.skipif(not VERL_PYTHON.is_file(), reason="needs verl's environment: run `make install-verl`")


def problems(n: int) -> pl.DataFrame:
    return pl.DataFrame({"problem_id": [f"p{i}" for i in range(n)], "problem": [f"Compute {i}+1." for i in range(n)],
                         "answer": [str(i + 1) for i in range(n)], "category": ["Algebra"] * n, "source": ["seed"] * n})


def job(out_dir: Path, n_problems: int = 2048) -> TrainJob:
    return TrainJob("initial", problems(n_problems), Path("Qwen/Qwen2.5-7B"), correct, out_dir, 200, "math", 0, "id",
                    Path("pipeline.yaml"))


def compose(overrides: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([str(VERL_PYTHON), str(Path(__file__).parent / "verl_compose.py")],
                          input=json.dumps(overrides), capture_output=True, text=True)


@needs_verl
@pytest.mark.parametrize("preset", PRESETS, ids=lambda path: path.name)
def test_every_verl_preset_composes_against_verls_own_config(preset, tmp_path):
    overrides = verl_overrides(job(tmp_path), load_config(preset).train, VerlLayout(tmp_path))

    composed = compose(overrides)

    assert composed.returncode == 0, composed.stderr
    config = json.loads(composed.stdout)
    assert config["trainer"]["use_v1"] is False and config["trainer"]["logger"] == ["console"]
    assert not config["algorithm"]["filter_groups"]["enable"]  # the initial run keeps every group
    assert config["algorithm"]["adv_estimator"] == "grpo"
    assert config["reward"]["custom_reward_function"] == {"path": str(tmp_path / "verl" / "reward.py"),
                                                          "name": "compute_score"}


@needs_verl
def test_a_misspelled_override_fails_to_compose(tmp_path):
    cfg = load_config(PRESETS[0]).train
    cfg.verl.overrides = [*cfg.verl.overrides, "actor_rollout_ref.actor.optim.lrr=1e-6"]
    composed = compose(verl_overrides(job(tmp_path), cfg, VerlLayout(tmp_path)))
    assert composed.returncode == 1 and "actor_rollout_ref.actor.optim.lrr" in composed.stderr


def test_the_7b_preset_carries_the_sws_authors_settings(tmp_path):
    overrides = verl_overrides(job(tmp_path), load_config(PRESET_DIR / "math12k-qwen2.5-7b.yaml").train,
                               VerlLayout(tmp_path))
    for setting in ("data.train_batch_size=1024", "actor_rollout_ref.actor.ppo_mini_batch_size=256",
                    "actor_rollout_ref.rollout.n=8", "actor_rollout_ref.actor.optim.lr=5e-07",
                    "data.max_prompt_length=1024", "data.max_response_length=7168",
                    "actor_rollout_ref.actor.use_kl_loss=True", "actor_rollout_ref.actor.kl_loss_coef=0.0"):
        assert setting in overrides
    assert "trainer.total_epochs=100" in overrides  # 200 steps of 1,024 from 2,048 problems: two steps a pass


@pytest.mark.parametrize("train, message", [
    ({"batch_size": 4096}, "'train.batch_size' is 4096, more than the 2048 problems"),
    ({"verl": {"mini_batch_size": 300}}, "'train.verl.mini_batch_size' is 300, which does not divide"),
    ({"verl": {"overrides": ["trainer.save_freq=3"]}}, "sets 'trainer.save_freq'; remove it from the overrides \\(set train.save_steps instead\\)"),
    ({"verl": {"overrides": ["trainer.save_freq"]}}, "has 'trainer.save_freq', which is not KEY=VALUE"),
    ({"verl": {"overrides": ["trainer.resume_mode=disable"]}}, r"remove it from the overrides \(sws fixes it: auto\)"),
    ({"verl": {"overrides": ["trainer.logger=[wandb]"]}}, "without console, whose step lines sws reads"),
    ({"micro_batch_size": 4}, "'train.micro_batch_size' is TRL's; verl's micro-batch is train.verl.micro_batch"),
])
def test_setups_verl_cannot_run_are_refused_before_anything_is_written(tmp_path, train, message):
    cfg = load_config(PRESETS[0]).train.model_validate({**load_config(PRESETS[0]).train.model_dump(), **train})
    with pytest.raises(UserError, match=message):
        verl_overrides(job(tmp_path), cfg, VerlLayout(tmp_path))


def test_report_to_adds_its_tracker_to_the_console_and_an_override_of_the_logger_replaces_it(tmp_path):
    cfg = load_config(PRESETS[0]).train.model_copy(update={"report_to": "tensorboard"})
    assert "trainer.logger=[console,tensorboard]" in verl_overrides(job(tmp_path), cfg, VerlLayout(tmp_path))

    cfg.verl.overrides = [*cfg.verl.overrides, "trainer.logger=[console,wandb]"]
    loggers = [item for item in verl_overrides(job(tmp_path), cfg, VerlLayout(tmp_path))
               if item.startswith("trainer.logger=")]

    assert loggers == ["trainer.logger=[console,wandb]"]


@needs_verl
@pytest.mark.parametrize(("override", "loggers"), [([], ["console", "tensorboard"]),
                                                  (["trainer.logger=[console,wandb]"], ["console", "wandb"])])
def test_the_tracker_composes_against_verls_own_config(tmp_path, override, loggers):
    cfg = load_config(PRESETS[0]).train.model_copy(update={"report_to": "tensorboard"})
    cfg.verl.overrides = [*cfg.verl.overrides, *override]

    composed = compose(verl_overrides(job(tmp_path), cfg, VerlLayout(tmp_path)))

    assert composed.returncode == 0, composed.stderr
    assert json.loads(composed.stdout)["trainer"]["logger"] == loggers


def test_the_launch_exports_where_the_tracker_writes(tmp_path):
    cfg = load_config(PRESETS[0]).train.model_copy(update={"report_to": "tensorboard"})
    write_launch(job(tmp_path / "train" / "initial"), cfg)

    script = (tmp_path / "train" / "initial" / "launch.sh").read_text()

    assert f"export TENSORBOARD_DIR={tmp_path / 'train' / 'initial' / 'tracking'}\n" in script


@pytest.fixture
def math_run(tmp_path) -> Path:
    """A prepared run of the 7B preset: seed problems, an augmented set and an initial checkpoint folder."""
    run = tmp_path / "run"
    write_table(run, "problems", problems(1100))
    write_table(run, "augmented", problems(1300).with_columns(source=pl.lit("syn")))
    (run / "train" / "initial" / "final").mkdir(parents=True)
    (run / "train" / "initial" / "final" / "config.json").write_text("{}")
    return run


@pytest.mark.parametrize("kind", ["initial", "augmented", "baseline"])
def test_dry_run_writes_the_launch_and_prints_its_command(math_run, kind):
    layout = VerlLayout(math_run / "train" / kind)
    result = CliRunner().invoke(app, ["train", kind, "--run", str(math_run), "--dry-run",
                                      "--config", str(PRESET_DIR / "math12k-qwen2.5-7b.yaml")])

    assert result.exit_code == 0, result.output
    assert result.stdout.strip().endswith("data.truncation=error")
    assert "-m verl.trainer.main_ppo" in result.stdout
    data = pl.read_parquet(layout.data)
    assert data.height == (1300 if kind == "augmented" else 1100)
    assert data["extra_info"][0] == {"index": 0, "problem_id": "p0", "split": "train", "category": "Algebra",
                                     "source": "syn" if kind == "augmented" else "seed"}
    assert data["prompt"][0][0]["role"] == "user" and data["reward_model"][0] == {"style": "rule", "ground_truth": "1"}
    assert ("compute_score = VerlReward(verifier='sws.worlds.math.verifier:MathVerifier', "
            "reward='sws.training.rewards:correct')") in layout.reward_module.read_text()
    overrides = layout.overrides_file.read_text().splitlines()
    assert all(f"{key}=" in layout.launch_script.read_text() for key in MANAGED_KEYS
               if kind == "augmented" or "filter_groups" not in key)
    model = "Qwen/Qwen2.5-7B" if kind == "initial" else str(math_run / "train" / "initial" / "final")
    assert f"actor_rollout_ref.model.path={model}" in overrides
    assert not (math_run / "manifests" / f"train_{kind}.json").exists()
    assert not (layout.checkpoints).exists()


@needs_verl
@pytest.mark.parametrize(("kind", "steps"), [("initial", 200), ("augmented", 600), ("baseline", 600)])
def test_each_dry_run_launch_passes_hydra_cfg_job_in_verls_environment(math_run, kind, steps, monkeypatch):
    monkeypatch.chdir(REPO)  # the preset's train.verl.python, .venv-verl/bin/python, is taken from here
    written = CliRunner().invoke(app, ["train", kind, "--run", str(math_run), "--dry-run",
                                       "--config", str(PRESET_DIR / "math12k-qwen2.5-7b.yaml")])
    assert written.exit_code == 0 and written.stdout.startswith(f"{VERL_PYTHON} -m verl.trainer.main_ppo")
    launch = math_run / "train" / kind / "launch.sh"
    printed = subprocess.run(["bash", str(launch), "--cfg", "job"], capture_output=True, text=True, timeout=300)
    assert printed.returncode == 0, printed.stderr[-2000:]
    model = "Qwen/Qwen2.5-7B" if kind == "initial" else str(math_run / "train" / "initial" / "final")
    for line in ("train_batch_size: 1024", f"path: {model}", f"total_training_steps: {steps}"):
        assert line in printed.stdout
    # The online filter runs in every continuing arm alike, as verl's DAPO group filter (v1 trainer).
    filtered = kind != "initial"
    assert f"use_v1: {str(filtered).lower()}" in printed.stdout
    filter_groups = printed.stdout.split("filter_groups:")[1].split("\n  ", 1)[0] + printed.stdout.split(
        "filter_groups:")[1]
    assert f"enable: {str(filtered).lower()}" in filter_groups.split("max_num_gen_batches")[0]
    assert ("metric: acc" in filter_groups.split("max_num_gen_batches")[0]) == filtered


def test_dry_run_with_the_trl_trainer_on_one_process_is_one_error_line(math_run):
    result = CliRunner().invoke(app, ["train", "initial", "--run", str(math_run), "--dry-run"])
    assert result.exit_code == 2 and "only with train.trl.num_processes > 1" in result.output


def test_an_arm_beside_a_filtered_one_runs_on_the_same_v1_trainer_without_the_filter(tmp_path):
    cfg = load_config(PRESET_DIR / "math12k-qwen2.5-7b.yaml").train
    baseline = TrainJob(**{**job(tmp_path).__dict__, "name": "baseline", "beside_filtered": True})
    overrides = verl_overrides(baseline, cfg, VerlLayout(tmp_path))
    assert "trainer.use_v1=True" in overrides and not any("filter_groups" in each for each in overrides)
    initial = verl_overrides(job(tmp_path), cfg, VerlLayout(tmp_path))
    assert "trainer.use_v1=False" in initial


@pytest.mark.parametrize(("band", "refused"), [((0.125, 0.875), False), ((0.05, 0.95), False),
                                               ((0.25, 0.75), True), ((0.0, 0.875), True)])
def test_verl_serves_only_bands_its_group_filter_keeps_the_same_groups_of(tmp_path, band, refused):
    cfg = load_config(PRESET_DIR / "math12k-qwen2.5-7b.yaml").train.model_copy(update={"online_filter": band})
    augmented = TrainJob(**{**job(tmp_path).__dict__, "name": "augmented", "online_filter": True})
    if refused:
        with pytest.raises(UserError, match=r"'train.online_filter' .* \[0.125, 0.875\]; use that band"):
            verl_overrides(augmented, cfg, VerlLayout(tmp_path))
        return
    overrides = verl_overrides(augmented, cfg, VerlLayout(tmp_path))
    assert {"trainer.use_v1=True", "algorithm.filter_groups.enable=True",
            "algorithm.filter_groups.metric=acc"} <= set(overrides)
    assert "trainer.use_v1=False" not in overrides


def test_a_reward_verls_module_cannot_import_by_name_is_refused_before_anything_is_written(tmp_path):
    cfg = load_config(REPO / "pipelines/math12k-qwen2.5-7b.yaml").train.model_copy(update={"reward": "inline"})
    inline = TrainJob(**{**job(tmp_path).__dict__, "reward": lambda batch: [0.0] * len(batch.completions)})
    with pytest.raises(UserError, match="field 'train.reward': reward 'inline' is no module-level function, so "
                                        "verl's reward module cannot import it by name"):
        write_launch(inline, cfg)
    assert not (tmp_path / "verl").exists()
