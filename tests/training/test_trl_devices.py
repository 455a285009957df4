"""TRL on GPUs: micro-batches and gradient accumulation, the fit check, and the accelerate launch."""

import os
import shlex
import sys
from pathlib import Path

import polars as pl
import pytest
import torch
import yaml
from typer.testing import CliRunner

from sws.cli import app
from sws.config import PipelineConfig, TrainConfig
from sws.errors import UserError
from sws.stages.train import side_by_side
from sws.tables import write_table
from sws.training import TrainJob
from sws.training.rewards import correct
from sws.training.trl import grpo_config
from sws.training.trl_devices import check_fit, device_batch
from sws.training.trl_launch import job_file, read_job

# Qwen2.5-7B's config.json as published with the model (7,615,616,512 parameters, bf16, 152,064 tokens).
QWEN_7B = Path(__file__).parents[1] / "fixtures" / "qwen2.5-7b-config"
# What the math12k-qwen2.5-7b preset gave TRL before it trained with verl.
OLD_MATH_PRESET = {"batch_size": 1024, "num_generations": 8, "max_completion_length": 4096}


def job(out_dir: Path, init_model: Path = QWEN_7B) -> TrainJob:
    problems = pl.DataFrame({"problem_id": ["p0", "p1"], "problem": ["1+1", "2+2"], "answer": ["2", "4"],
                             "category": ["a", "a"], "source": ["seed", "seed"]})
    return TrainJob("initial", problems, init_model, correct, out_dir, 4, "math", 0, "id", Path("pipeline.yaml"))


@pytest.mark.parametrize(("micro", "processes", "per_device", "accumulation"), [
    (None, 1, 8, 1),  # the CPU default: the whole step in one pass, as before micro-batches existed
    (2, 1, 2, 4),
    (2, 2, 2, 2),
    (None, 4, 2, 1),
])
def test_gradient_accumulation_makes_up_the_batch_in_trls_config(tmp_path, micro, processes, per_device,
                                                                  accumulation):
    cfg = TrainConfig(batch_size=2, num_generations=4, micro_batch_size=micro, trl={"num_processes": processes})

    args = grpo_config(job(tmp_path), cfg)

    assert (args.per_device_train_batch_size, args.gradient_accumulation_steps) == (per_device, accumulation)
    assert args.generation_batch_size == 8  # one generation per step, of all its completions


@pytest.mark.parametrize(("settings", "message"), [
    ({"micro_batch_size": 3}, "field 'train.micro_batch_size' is 3, which does not divide the 8 completions each "
                              "of 1 device"),
    ({"micro_batch_size": 8, "trl": {"num_processes": 2}}, "'train.micro_batch_size' is 8, which does not divide "
                                                           "the 4 completions each of 2 device"),
    ({"trl": {"num_processes": 3}}, "field 'train.trl.num_processes' is 3, which does not divide the 8 completions"),
])
def test_batches_that_do_not_divide_are_refused(settings, message):
    with pytest.raises(UserError, match=message):
        device_batch(TrainConfig(batch_size=2, num_generations=4, **settings), Path("pipeline.yaml"))


def fit(memory_gb: float, **settings) -> None:
    cfg = TrainConfig(**{**OLD_MATH_PRESET, **settings, "trl": {"device_memory_gb": memory_gb}})
    check_fit(cfg, QWEN_7B, device_batch(cfg, Path("p.yaml")), Path("p.yaml"))


def test_the_old_math_presets_micro_batch_is_refused_naming_the_setting_to_lower():
    # 4 x 7.6B bf16 values = 60.9 GB; 19.1 GB left holds the bf16 logits of 15 completions of 4,096 tokens,
    # and 8 is the largest size up to 15 that divides the 8,192 completions of a step.
    with pytest.raises(UserError, match=r"one micro-batch of 1024 completions × 4096 tokens needs at least 1275.6 GB "
                                        r"of logits besides 60.9 GB for the model, more than the 80.0 GB of device "
                                        r"memory; lower train.micro_batch_size to 8 \(the largest divisor of a "
                                        r"device's 8192 completions that fits\)$"):
        fit(80, micro_batch_size=1024)
    with pytest.raises(UserError, match="micro-batch of 8192 completions"):  # unset: a device's whole share
        fit(80)
    fit(80, micro_batch_size=8)


def test_a_reference_model_takes_its_share():
    # Five bf16 copies of 7.6B values leave 3.8 GB: three completions' logits, and 2 divides 8192.
    with pytest.raises(UserError, match="lower train.micro_batch_size to 2 "):
        fit(80, micro_batch_size=8, beta=0.04)


def test_a_model_whose_training_state_alone_does_not_fit_is_refused_naming_verl():
    with pytest.raises(UserError, match="needs at least 60.9 GB per device for weights, gradients and AdamW states, "
                                        "more than the 40.0 GB of device memory; .* train.trainer: verl"):
        fit(40, micro_batch_size=1)


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU the check uses the GPU's memory")
def test_nothing_is_checked_on_a_cpu_without_a_memory_setting():
    cfg = TrainConfig(**OLD_MATH_PRESET)
    check_fit(cfg, Path("no-such-model"), device_batch(cfg, Path("p.yaml")), Path("p.yaml"))


@pytest.fixture
def math_run(tmp_path) -> Path:
    run = tmp_path / "run"
    write_table(run, "problems", job(tmp_path).problems)
    return run


def pipeline(tmp_path: Path, **train) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump({"world": "math", "train": {"init_model": str(QWEN_7B), **train}}))
    return path


def test_sws_train_refuses_a_micro_batch_that_cannot_fit_with_one_line_and_writes_nothing(math_run, tmp_path):
    config = pipeline(tmp_path, **{**OLD_MATH_PRESET, "batch_size": 2}, micro_batch_size=16,
                      trl={"device_memory_gb": 80})

    result = CliRunner().invoke(app, ["train", "initial", "--run", str(math_run), "--config", str(config)])

    assert result.exit_code == 2
    assert result.output.strip().splitlines() == [
        f"error: {math_run / 'config.yaml'}: field 'train.micro_batch_size': one micro-batch of 16 completions × 4096 "
        "tokens needs at least 19.9 GB of logits besides 60.9 GB for the model, more than the 80.0 GB of device memory; lower "
        "train.micro_batch_size to 8 (the largest divisor of a device's 16 completions that fits)"]
    assert not (math_run / "train").exists()


@pytest.mark.skipif(torch.cuda.device_count() >= 2, reason="checks a machine with fewer GPUs than processes")
def test_more_processes_than_gpus_are_refused_before_anything_is_written(math_run, tmp_path):
    config = pipeline(tmp_path, batch_size=2, num_generations=4, trl={"num_processes": 2})

    result = CliRunner().invoke(app, ["train", "initial", "--run", str(math_run), "--config", str(config)])

    assert result.exit_code == 2
    assert "field 'train.trl.num_processes' is 2, but" in result.output and "CUDA GPU(s) are visible" in result.output
    assert not (math_run / "train").exists()


def test_dry_run_on_several_gpus_writes_the_accelerate_launch_and_the_job_it_runs(math_run, tmp_path):
    config = pipeline(tmp_path, batch_size=2, num_generations=4, micro_batch_size=2, trl={"num_processes": 2})
    out_dir = math_run / "train" / "initial"

    result = CliRunner().invoke(app, ["train", "initial", "--run", str(math_run), "--config", str(config),
                                      "--dry-run"])

    assert result.exit_code == 0, result.output
    spec = job_file(out_dir).absolute()
    command = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
               "-m", "sws.training.trl_worker", str(spec)]
    assert result.stdout.strip() == shlex.join(command)
    script = out_dir / "launch.sh"
    assert os.access(script, os.X_OK) and f"exec {shlex.join(command[:1])}" in script.read_text()
    written, cfg = read_job(spec)
    assert written.problems.equals(job(tmp_path).problems) and written.init_model == QWEN_7B
    assert written.out_dir == out_dir.absolute() and written.steps == 200
    assert (cfg.micro_batch_size, cfg.trl.num_processes) == (2, 2)
    assert not (math_run / "manifests" / "train_initial.json").exists()


def test_runs_on_several_gpus_never_train_side_by_side():
    cfg = PipelineConfig(train={"side_by_side": True, "trl": {"num_processes": 2}})
    assert not side_by_side(cfg, 2) and side_by_side(cfg.model_copy(update={"train": TrainConfig(side_by_side=True)}), 2)
