"""The `verl` trainer: verl's GRPO (`python -m verl.trainer.main_ppo`) as a subprocess in verl's own environment.

verl pins torch, transformers and trl versions that do not fit sws's environment, so sws never imports it: it
writes the launch (`sws.training.verl_launch`), runs `launch.sh` with `train.verl.python`, then reads the
rollout dumps into the rollout log and the curve, and merges the last FSDP checkpoint into a Hugging Face
folder at `final/`. verl resumes from its latest checkpoint itself (`trainer.resume_mode=auto`); a job whose
last checkpoint is already there is not launched again.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import time
from pathlib import Path

from sws import ui
from sws.atomic_files import open_append, write_json
from sws.config import TrainConfig
from sws.errors import UserError
from sws.rollouts import read_verl_dumps, rollouts_from_verl_dumps
from sws.run_dir import final_dir
from sws.training import (
    TrainJob,
    TrainOutcome,
    progress_path,
    replace_dir,
    staging_dir,
    start_or_resume,
)
from sws.training.verl_curve import console_steps, training_curve
from sws.training.verl_launch import (
    VerlLayout,
    actor_checkpoint,
    checkpoint_step,
    merge_command,
    require_verl_python,
    write_launch,
)


def prepare(job: TrainJob, cfg: TrainConfig) -> str:
    """Write the launch without running it; return the command, as one shell line."""
    return shlex.join(write_launch(job, cfg))


def train(job: TrainJob, cfg: TrainConfig, force: bool = False) -> TrainOutcome:
    python = require_verl_python(cfg, job.config_file)
    layout = VerlLayout(job.out_dir)
    start_or_resume(job, force, (layout.checkpoints, layout.dumps, layout.log, final_dir(job.out_dir)))
    write_launch(job, cfg)
    resumed_from = checkpoint_step(layout.checkpoints)
    started = time.perf_counter()
    if resumed_from < job.steps:
        if resumed_from:
            ui.info(f"train {job.name}: verl resumes from step {resumed_from} ({layout.checkpoints})")
        _run_logged(["bash", str(layout.launch_script)], layout.log, job)
    seconds = time.perf_counter() - started
    if checkpoint_step(layout.checkpoints) != job.steps:
        raise UserError(f"{layout.log}: verl ended without a checkpoint of step {job.steps} in "
                        f"{layout.checkpoints}; check the log and that train.save_steps leaves a last save")
    # Read before merging: a dump that names no known problem stops here, with no final/ written.
    rollouts = rollouts_from_verl_dumps(layout.dumps, job.problems)
    curve = training_curve(read_verl_dumps(layout.dumps), _read_log(layout.log))
    _merge(python, actor_checkpoint(layout.checkpoints, job.steps), final_dir(job.out_dir), layout.log)
    return TrainOutcome(
        final_dir=final_dir(job.out_dir),
        rollouts=rollouts,
        curve=curve,
        resumed_from_step=resumed_from,
        seconds_per_step=round(seconds / max(1, job.steps - resumed_from), 4),
    )


def _run_logged(command: list[str], log: Path, job: TrainJob) -> None:
    """Run verl, appending its output to `log`; show the step it reached; a failure names the log."""
    ui.info(f"train {job.name}: verl's output goes to {log}")
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    bar = ui.progress_bar()
    with bar, open_append(log) as sink:
        task = bar.add_task(f"train {job.name} (verl)", total=job.steps, rate="")
        process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                   errors="replace")
        assert process.stdout is not None
        for line in process.stdout:
            sink.write(line)
            sink.flush()
            for step in console_steps(line):
                bar.update(task, completed=step)
                write_json(progress_path(job.out_dir), {"step": step, "total": job.steps, "rate": ""})
        code = process.wait()
    if code != 0:
        raise UserError(f"verl exited with code {code} in the {job.name} run; its output is in {log} "
                        f"(rerun `sws train {job.name}` to resume from the last checkpoint)")


def _merge(python: Path, actor_dir: Path, destination: Path, log: Path) -> None:
    """Convert the FSDP actor checkpoint into a Hugging Face folder at `destination`, atomically."""
    staging = staging_dir(destination)
    with open_append(log) as sink:
        code = subprocess.run(merge_command(python, actor_dir, staging), stdout=sink, stderr=subprocess.STDOUT,
                              check=False).returncode
    if code != 0 or not (staging / "config.json").is_file():
        raise UserError(f"verl.model_merger could not convert {actor_dir} (exit code {code}); its output is in {log}")
    replace_dir(staging, destination)


def _read_log(log: Path) -> str:
    return log.read_text(errors="replace") if log.is_file() else ""
