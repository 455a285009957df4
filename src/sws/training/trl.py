"""The `trl` trainer: `trl.GRPOTrainer` on one node (CPU or GPUs), with the rollout log, a progress bar and resume.

On CPU it trains with `use_cpu=True`, fp32 and one torch thread (more threads are several times slower for
tiny models on small machines). Checkpoints go to `<out_dir>/checkpoints` every `save_steps`; a rerun of the
same job resumes from the latest complete one. Micro-batches, gradient accumulation and the check that a
micro-batch fits a device are `sws.training.trl_devices`'. With `train.trl.num_processes` > 1 the training
runs in `accelerate launch` worker processes (`sws.training.trl_launch`); this process prepares the folder
before and collects the rollout log, the curve and `final/` after.
"""

from __future__ import annotations

import dataclasses
import json
import shlex
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import polars as pl
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback, TrainerState
from transformers.trainer_callback import PrinterCallback, ProgressCallback
from trl import GRPOConfig, GRPOTrainer

from sws import ui
from sws.atomic_files import write_json
from sws.config import TrainConfig
from sws.errors import UserError
from sws.run_dir import final_dir
from sws.training import (
    TrainJob,
    TrainOutcome,
    launch_script_path,
    online_filter_band,
    progress_path,
    replace_dir,
    staging_dir,
    start_or_resume,
)
from sws.training.reward import CorrectnessReward
from sws.training.rollout_log import RolloutLog
from sws.training.tracking import require_tracker, tracking_variables
from sws.training.trl_devices import check_fit, device_batch, require_gpus
from sws.training.trl_launch import log_history_file, write_launch
from sws.world import get_world

# TrainerState.log_history keys kept in the curve, under the curve's column names.
CURVE_COLUMNS = {
    "reward": "reward",
    "reward_std": "reward_std",
    "loss": "loss",
    "frac_reward_zero_std": "frac_reward_zero_std",
    "completions/mean_length": "completion_length",
    "learning_rate": "learning_rate",
    "entropy": "entropy",
    "kl": "kl",
    "step_time": "seconds",
}
# Settings sws decides; `train.extra` may set any other GRPOConfig field.
MANAGED_FIELDS = {
    "output_dir", "max_steps", "per_device_train_batch_size", "gradient_accumulation_steps", "generation_batch_size",
    "steps_per_generation", "num_generations", "learning_rate",
    "max_completion_length", "temperature", "beta", "save_steps", "use_vllm", "seed", "report_to",
}


def train(job: TrainJob, cfg: TrainConfig, force: bool = False) -> TrainOutcome:
    refuse_what_cannot_run(job, cfg)
    if cfg.trl.num_processes > 1:
        require_gpus(cfg, job.config_file)
    log = RolloutLog(job.out_dir / "rollouts")
    resume_from, resume_step = _prepare_out_dir(job, log, force)
    started = time.perf_counter()
    if resume_from is not None and resume_step >= job.steps:
        # transformers would take one more step from a checkpoint at max_steps; the run is already done.
        ui.info(f"train {job.name}: all {job.steps} steps done ({resume_from})")
        _save_final(AutoModelForCausalLM.from_pretrained(resume_from), load_tokenizer(job.init_model),
                    final_dir(job.out_dir))
        log_history = TrainerState.load_from_json(str(resume_from / "trainer_state.json")).log_history
    elif cfg.trl.num_processes == 1:
        log_history = run_training(job, cfg)
    else:
        log_history = _run_launch(job, cfg)
    seconds = time.perf_counter() - started
    return TrainOutcome(
        final_dir=final_dir(job.out_dir),
        rollouts=log.table(),
        curve=training_curve(log_history),
        resumed_from_step=resume_step,
        seconds_per_step=round(seconds / max(1, job.steps - resume_step), 4),
    )


def prepare(job: TrainJob, cfg: TrainConfig) -> str:
    """Write the launch of a run on several GPUs without running it; return its command, as one shell line."""
    if cfg.trl.num_processes == 1:
        raise UserError(f"{job.config_file}: --dry-run writes a launch script, which field 'train.trainer' 'trl' "
                        "has only with train.trl.num_processes > 1 (it trains in-process); set one of them")
    refuse_what_cannot_run(job, cfg)
    return shlex.join(write_launch(job, cfg))


def refuse_what_cannot_run(job: TrainJob, cfg: TrainConfig) -> None:
    """UserError, before anything is written, for settings TRL rejects, a micro-batch no device can hold or a
    tracker that is not installed."""
    grpo_config(job, cfg)
    require_tracker(cfg.report_to, job.config_file)
    check_fit(cfg, job.init_model, device_batch(cfg, job.config_file), job.config_file)


def run_training(job: TrainJob, cfg: TrainConfig) -> list[dict[str, Any]] | None:
    """Train from the latest checkpoint in the job's folder (prepared by `train`) to `job.steps`.

    The main process saves `final/` and returns TRL's log history; other processes of a multi-GPU run, None.
    """
    args = grpo_config(job, cfg)
    if args.use_cpu:
        torch.set_num_threads(1)
    tokenizer = load_tokenizer(job.init_model)
    log = RolloutLog(job.out_dir / "rollouts")
    resume_from, resume_step = latest_checkpoint(job.out_dir / "checkpoints")
    reward = CorrectnessReward(log, cfg.num_generations, get_world(job.world).verifier, job.reward, cfg.reward,
                               online_filter_band(job, cfg))
    with tracking_variables(cfg.report_to, job.out_dir):
        trainer = (BandFilteredGRPOTrainer if reward.band is not None else GRPOTrainer)(
            model=str(job.init_model),
            reward_funcs=[reward],
            args=args,
            train_dataset=grpo_dataset(job.problems, job.world),
            processing_class=tokenizer,
            callbacks=[FlushRolloutsBeforeCheckpoint(log),
                       TrainProgress(f"train {job.name}", progress_path(job.out_dir))],
        )
        _drop_console_printers(trainer)
        if resume_from is not None and trainer.is_world_process_zero():
            ui.info(f"train {job.name}: resuming from step {resume_step} ({resume_from})")
        trainer.train(resume_from_checkpoint=str(resume_from) if resume_from is not None else None)
    if not trainer.is_world_process_zero():
        return None
    log.flush()
    _save_final(trainer.accelerator.unwrap_model(trainer.model), tokenizer, final_dir(job.out_dir))
    return trainer.state.log_history


class BandFilteredGRPOTrainer(GRPOTrainer):
    """GRPO whose update leaves out the rollout groups the reward function dropped (`CorrectnessReward.dropped`):
    their completions are masked out of the loss, and the token count the loss divides by counts only the kept
    ones, as DAPO's dynamic sampling trains on the kept groups alone (without drawing more to refill the batch)."""

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        dropped = self.reward_funcs[0].dropped
        kept = torch.tensor([row["problem_id"] not in dropped for row in inputs],
                            device=output["completion_mask"].device)
        output["completion_mask"] = output["completion_mask"] * kept.unsqueeze(1).to(output["completion_mask"].dtype)
        output["advantages"] = output["advantages"] * kept.to(output["advantages"].dtype)
        output["num_items_in_batch"] = self.accelerator.gather(output["completion_mask"].sum()).sum()
        return output


def _run_launch(job: TrainJob, cfg: TrainConfig) -> list[dict[str, Any]]:
    """Run the job in `accelerate launch` workers (their output goes to this terminal); return the log history."""
    launch = write_launch(job, cfg)
    ui.info(f"train {job.name}: {cfg.trl.num_processes} processes: {shlex.join(launch)}")
    code = subprocess.run(["bash", str(launch_script_path(job.out_dir))], check=False).returncode
    if code != 0:
        raise UserError(f"accelerate exited with code {code} in the {job.name} run (rerun `sws train {job.name}` "
                        f"to resume from the last checkpoint)")
    return json.loads(log_history_file(job.out_dir).read_text())


def grpo_config(job: TrainJob, cfg: TrainConfig) -> Any:
    """The GRPOConfig of a job; unknown `train.extra` fields raise UserError before anything is written."""
    known = {field.name for field in dataclasses.fields(GRPOConfig)}
    for name in cfg.extra:
        if name not in known or name in MANAGED_FIELDS:
            why = "is set by sws from train.*" if name in known else "is not a trl.GRPOConfig field"
            raise UserError(f"{job.config_file}: field 'train.extra.{name}' {why}; remove it or check its spelling")
    batch = device_batch(cfg, job.config_file)
    on_cpu = not torch.cuda.is_available()
    settings: dict[str, Any] = {
        "use_cpu": on_cpu,
        "bf16": not on_cpu,
        "logging_steps": 1,
        "lr_scheduler_type": "constant",
        "save_strategy": "steps",
        "save_total_limit": 2,
        "disable_tqdm": True,
        "dataloader_num_workers": 0,
        **cfg.extra,
        "output_dir": str(job.out_dir / "checkpoints"),
        "max_steps": job.steps,
        "per_device_train_batch_size": batch.micro_batch_size,
        "gradient_accumulation_steps": batch.accumulation_steps,
        # One generation per optimizer step, of all its completions over all processes.
        "generation_batch_size": cfg.batch_size * cfg.num_generations,
        "num_generations": cfg.num_generations,
        "learning_rate": cfg.learning_rate,
        "max_completion_length": cfg.max_completion_length,
        "temperature": cfg.temperature,
        "beta": cfg.beta,
        "save_steps": cfg.save_steps,
        "use_vllm": cfg.use_vllm,
        "seed": job.seed,
        "report_to": cfg.report_to,
        "run_name": f"{job.run_name}-{job.name}",
    }
    if cfg.use_vllm:
        settings.setdefault("vllm_mode", "colocate")
    try:
        return GRPOConfig(**settings)
    except ValueError as exc:
        raise UserError(f"{job.config_file}: section 'train' is not a valid GRPO setup: {exc}") from None


def grpo_dataset(problems: pl.DataFrame, world: str) -> Any:
    """TRL's dataset: the policy prompt of each problem (raw text, or chat messages) with its id, text and
    answer."""
    from datasets import Dataset

    prompts = []
    for problem in problems["problem"]:
        request = get_world(world).policy_prompt(problem)
        prompts.append(request["prompt"] if "prompt" in request else list(request["messages"]))
    return Dataset.from_dict({
        "prompt": prompts,
        "problem_id": problems["problem_id"].to_list(),
        "problem": problems["problem"].to_list(),
        "answer": problems["answer"].to_list(),
    })


def load_tokenizer(model_dir: Path) -> Any:
    """The model folder's tokenizer, left-padded for generation, with a pad token."""
    tokenizer = AutoTokenizer.from_pretrained(str(model_dir), padding_side="left")
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def training_curve(log_history: list[dict[str, Any]]) -> pl.DataFrame:
    """One row per logged optimizer step: step, mean reward and the other GRPO statistics TRL reports."""
    rows = [
        {"step": int(entry["step"]), **{name: _float(entry.get(key)) for key, name in CURVE_COLUMNS.items()}}
        for entry in log_history
        if "reward" in entry and "step" in entry
    ]
    schema = {"step": pl.Int64, **{name: pl.Float64 for name in CURVE_COLUMNS.values()}}
    return pl.DataFrame(rows, schema=schema, orient="row") if rows else pl.DataFrame(schema=schema)


def _float(value: Any) -> float | None:
    return None if value is None else float(value)


def latest_checkpoint(checkpoints_dir: Path) -> tuple[Path | None, int]:
    """The newest complete checkpoint and its step; (None, 0) when there is none.

    The trainer writes `trainer_state.json` last, so a checkpoint without it was cut short by a kill.
    """
    complete = [
        path for path in Path(checkpoints_dir).glob("checkpoint-*")
        if path.name.split("-")[-1].isdigit() and (path / "trainer_state.json").is_file()
    ]
    if not complete:
        return None, 0
    latest = max(complete, key=lambda path: int(path.name.split("-")[-1]))
    return latest, int(latest.name.split("-")[-1])


def _prepare_out_dir(job: TrainJob, log: RolloutLog, force: bool) -> tuple[Path | None, int]:
    """Start over (forced, or another job's leftovers) or set up resuming; return the checkpoint to resume."""
    checkpoints = job.out_dir / "checkpoints"
    start_or_resume(job, force, (checkpoints, log.shard_dir, final_dir(job.out_dir)))
    checkpoint, step = latest_checkpoint(checkpoints)
    for partial in checkpoints.glob("checkpoint-*"):
        if partial != checkpoint and not (partial / "trainer_state.json").is_file():
            shutil.rmtree(partial)
    log.truncate_after(step)
    return checkpoint, step


def _save_final(model: Any, tokenizer: Any, destination: Path) -> None:
    """Save the trained model and tokenizer, replacing an older `final/` only once the new one is complete."""
    staging = staging_dir(destination)
    model.save_pretrained(staging)
    tokenizer.save_pretrained(staging)
    replace_dir(staging, destination)


def _drop_console_printers(trainer: Any) -> None:
    """Remove transformers' own tqdm bar and log printer; TrainProgress shows progress instead."""
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)


class FlushRolloutsBeforeCheckpoint(TrainerCallback):
    """Write the buffered rollout rows when the trainer is about to save, so every checkpoint has its rows."""

    def __init__(self, log: RolloutLog) -> None:
        self.log = log

    def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        if control.should_save:
            self.log.flush()

    def on_train_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        self.log.flush()


class TrainProgress(TrainerCallback):
    """A rich progress bar (steps done of max_steps, the latest mean reward, seconds per step), also written to
    `progress.json` so another process can show it."""

    def __init__(self, description: str, status_file: Path) -> None:
        self.description = description
        self.status_file = status_file
        self.reward: float | None = None

    def on_train_begin(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        self.shown = state.is_world_process_zero  # one bar for a run on several GPUs
        if not self.shown:
            return
        self.bar = ui.progress_bar()
        self.bar.start()
        self.task = self.bar.add_task(self.description, total=state.max_steps, completed=state.global_step, rate="")
        self.first_step = state.global_step
        self.started = time.perf_counter()

    def on_log(self, args: Any, state: Any, control: Any, logs: dict[str, Any] | None = None, **_: Any) -> None:
        if logs and "reward" in logs:
            self.reward = float(logs["reward"])
        self._show(state.global_step, state.max_steps)

    def on_step_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        self._show(state.global_step, state.max_steps)

    def _show(self, step: int, total: int) -> None:
        if not self.shown:
            return
        per_step = (time.perf_counter() - self.started) / max(1, step - self.first_step)
        reward = "" if self.reward is None else f"reward {self.reward:.2f} · "
        rate = f"{reward}{per_step:.2f} s/step"
        self.bar.update(self.task, completed=step, rate=rate)
        write_json(self.status_file, {"step": step, "total": total, "rate": rate})

    def on_train_end(self, args: Any, state: Any, control: Any, **_: Any) -> None:
        if self.shown:
            self.bar.stop()
