"""What `sws train` writes to run a TRL job on several GPUs (`train.trl.num_processes` > 1), under `train/<kind>/`.

- `trl/problems.parquet` and `trl/job.json`: the job (its problems; the rest of its `TrainJob`, the reward by
  its import name) and `train.*`;
- `launch.sh`: `accelerate launch --multi_gpu --num_processes N -m sws.training.trl_worker .../trl/job.json`
  with the interpreter sws runs on; `sws train` runs it, and it runs as it is from any directory;
- `trl/log_history.json`: TRL's log history, written by the main worker at the end (the curve's source).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import polars as pl

from sws.atomic_files import write_json, write_parquet
from sws.config import TrainConfig
from sws.references import load
from sws.training import TrainJob, reward_name, write_launch_script

WORKER = "sws.training.trl_worker"


def job_file(out_dir: Path) -> Path:
    return Path(out_dir) / "trl" / "job.json"


def log_history_file(out_dir: Path) -> Path:
    return Path(out_dir) / "trl" / "log_history.json"


def write_launch(job: TrainJob, cfg: TrainConfig) -> list[str]:
    """Write the job for the workers and launch.sh; return the command launch.sh runs."""
    spec = job_file(job.out_dir).absolute()
    reward = reward_name(job, cfg, "the TRL worker processes")
    write_parquet(job.problems, spec.with_name("problems.parquet"))
    write_json(spec, {
        "name": job.name, "init_model": str(job.init_model), "reward": reward, "out_dir": str(job.out_dir.absolute()),
        "steps": job.steps, "world": job.world, "seed": job.seed, "identity": job.identity,
        "config_file": str(job.config_file), "run_name": job.run_name, "online_filter": job.online_filter,
        "train": cfg.model_dump(mode="json"),
    })
    command = launch_command(cfg.trl.num_processes, spec)
    write_launch_script(job.out_dir, (
        f"TRL GRPO run '{job.name}' ({job.steps} steps) on {cfg.trl.num_processes} GPUs, written by "
        f"`sws train {job.name}`, which runs this file."
    ), command)
    return command


def launch_command(num_processes: int, spec: Path) -> list[str]:
    return [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes",
            str(num_processes), "-m", WORKER, str(spec)]


def read_job(spec: Path) -> tuple[TrainJob, TrainConfig]:
    """The job and settings `write_launch` wrote."""
    data = json.loads(Path(spec).read_text())
    job = TrainJob(
        name=data["name"], problems=pl.read_parquet(Path(spec).with_name("problems.parquet")),
        init_model=Path(data["init_model"]), reward=load(data["reward"]), out_dir=Path(data["out_dir"]),
        steps=data["steps"], world=data["world"], seed=data["seed"], identity=data["identity"],
        config_file=Path(data["config_file"]), run_name=data["run_name"], online_filter=data["online_filter"],
    )
    return job, TrainConfig.model_validate(data["train"])
