"""`sws train initial|augmented|baseline|selected`: the GRPO runs of the method (DESIGN §1 stages 1 and 6).

- initial: from `train.init_model` (empty in the arith world: the bootstrapped tiny policy) on the seed problems
  → `train/initial/final`, plus `rollouts.parquet`, the rollout log `sws identify` reads;
- augmented: from `train/initial/final` on `augmented.parquet` → `train/augmented/final`;
- baseline: from `train/initial/final` on the seed problems, for as many steps as augmented (unless
  `train.baseline_steps` says otherwise) → `train/baseline/final`; the comparison the paper makes;
- selected (with `select.arm`): from `train/initial/final` on `selected_mix.parquet` (seed ∪ the pool problems
  `sws select` took) for as many steps as augmented → `train/selected/final`; selection against synthesis.

Each run also writes its curve (`train/<kind>/curve.parquet`); the runs from the initial policy keep their rollout
logs in `train/<kind>/rollouts.parquet`. A killed run resumes from its latest checkpoint when rerun. With
`train.trainer: verl`, or TRL on several GPUs, `dry_run` writes a run's launch (`train/<kind>/launch.sh`)
without running it.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from sws.artifacts import (
    TRAIN_KINDS,
    StageResult,
    config_hash,
    current_manifest,
    fingerprint,
    read_table,
    run_stage,
    table_path,
    write_table,
)
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.run_dir import RunDir
from sws.stage import Stage
from sws.training import TrainJob, progress_path, train, trainer_module
from sws.training.rewards import get_reward
from sws.world import get_world

CONTINUATIONS = ("augmented", "baseline")
# The selected arm trains as long as augmented: only its problems differ.
STEP_FIELDS = {"initial": "initial_steps", "augmented": "augmented_steps", "baseline": "baseline_steps",
               "selected": "augmented_steps"}
# The table each run trains on.
TRAINING_SETS = {"initial": "problems", "augmented": "augmented", "baseline": "problems", "selected": "selected_mix"}


@dataclass(frozen=True)
class TrainingStage:
    """One run as a stage: what decides whether it is done (name, config, inputs, outputs) and what it trains.

    `init_model` None means the policy the world builds (arith: its warm-started tiny policy), built only when
    the run starts.
    """

    kind: str
    config: dict[str, Any]
    inputs: list[Path]
    outputs: list[Path]
    problems: pl.DataFrame
    init_model: Path | None
    out_dir: Path
    config_file: Path
    rollouts_name: str

    @property
    def name(self) -> str:
        return f"train_{self.kind}"

    def job(self, cfg: PipelineConfig) -> TrainJob:
        return TrainJob(
            name=self.kind,
            problems=self.problems.select("problem_id", "problem", "answer", "category", "source"),
            init_model=self.init_model if self.init_model is not None else get_world(cfg.world).built_policy(cfg).build(),
            reward=get_reward(cfg.train.reward, self.config_file),
            out_dir=self.out_dir,
            steps=self.config["steps"],
            world=cfg.world,
            seed=cfg.seed,
            identity=config_hash({"config": self.config, "inputs": [fingerprint(path) for path in self.inputs]}),
            config_file=self.config_file,
            run_name=self.out_dir.parent.parent.name,
        )


def plan(cfg: PipelineConfig, run_dir: Path, kind: str) -> TrainingStage:
    """The `kind` run of `run_dir` as a stage; raises UserError for a setup `sws train` cannot run."""
    if kind not in TRAIN_KINDS:
        raise ValueError(f"unknown training kind '{kind}'; use one of {', '.join(TRAIN_KINDS)}")
    run_dir = Path(run_dir)
    config_file = RunDir(run_dir).config
    dataset = TRAINING_SETS[kind]
    problems = read_table(run_dir, dataset)
    if problems.height == 0:
        raise UserError(f"{table_path(run_dir, dataset)}: no problems to train on; rebuild it with its command")
    steps = training_steps(cfg, kind)
    init_model = _init_model(cfg, run_dir, kind, config_file)
    out_dir = RunDir(run_dir).train(kind)
    rollouts_name = "rollouts" if kind == "initial" else f"train/{kind}/rollouts"
    # A run's identity leaves out the other trainer's settings, and the memory the fit check assumes.
    not_deciding: dict[str, Any] = {field: True for field in (*STEP_FIELDS.values(), "side_by_side")}
    if cfg.train.trainer == "trl":
        not_deciding |= {"verl": True, "trl": {"device_memory_gb"}}
    else:
        not_deciding |= {"trl": True, "micro_batch_size": True}
    stage_config: dict[str, Any] = {
        "kind": kind, "steps": steps, "world": cfg.world, "seed": cfg.seed,
        "train": cfg.train.model_dump(mode="json", exclude=not_deciding),
        "init_model": str(init_model) if init_model is not None else get_world(cfg.world).built_policy(cfg).identity,
    }
    inputs = [table_path(run_dir, dataset)]
    if init_model is not None and init_model.is_dir():
        inputs.append(init_model)
    outputs = [RunDir(run_dir).checkpoint(kind), table_path(run_dir, f"train/{kind}/curve"), table_path(run_dir, rollouts_name)]
    return TrainingStage(kind, stage_config, inputs, outputs, problems, init_model, out_dir, config_file,
                         rollouts_name)


def run(cfg: PipelineConfig, run_dir: Path, force: bool = False, kind: str = "initial") -> StageResult:
    """Train the `kind` policy of the run (one of TRAIN_KINDS)."""
    run_dir = Path(run_dir)
    stage = plan(cfg, run_dir, kind)

    def body() -> StageResult:
        job = stage.job(cfg)
        outcome = train(job, cfg.train, force)
        write_table(run_dir, stage.rollouts_name, outcome.rollouts)
        write_table(run_dir, f"train/{kind}/curve", outcome.curve)
        tail = outcome.curve.tail(max(1, outcome.curve.height // 10))
        return StageResult(
            stage.name,
            rows={stage.rollouts_name: outcome.rollouts.height, f"train/{kind}/curve": outcome.curve.height},
            info={
                "steps": job.steps,
                "final": str(outcome.final_dir),
                "resumed_from_step": outcome.resumed_from_step,
                "seconds_per_step": outcome.seconds_per_step,
                "final_mean_reward": round(float(tail["reward"].mean() or 0.0), 4),
            },
        )

    return run_stage(run_dir, stage.name, config=stage.config, inputs=stage.inputs, outputs=stage.outputs,
                     body=body, force=force)


def dry_run(cfg: PipelineConfig, run_dir: Path, kind: str = "initial") -> str:
    """Write the `kind` run's launch (verl, or TRL on several GPUs) without running it; return its command."""
    stage = plan(cfg, Path(run_dir), kind)
    return trainer_module(cfg.train).prepare(stage.job(cfg), cfg.train)


def run_continuations(cfg: PipelineConfig, run_dir: Path, force: bool = False) -> list[StageResult]:
    """Train augmented and baseline, side by side when `train.side_by_side` allows (both start from initial)."""
    run_dir = Path(run_dir)
    stages = [plan(cfg, run_dir, kind) for kind in CONTINUATIONS]
    pending = [stage for stage in stages if force or current_manifest(
        run_dir, stage.name, stage.config, stage.inputs, stage.outputs) is None]
    if len(pending) < 2 or not side_by_side(cfg):
        return [run(cfg, run_dir, force, kind) for kind in CONTINUATIONS]
    from sws.side_by_side import Task, run_side_by_side

    return run_side_by_side([
        Task(f"train {stage.kind}", run, (cfg, run_dir, force, stage.kind), stage.out_dir / "log.txt",
             progress_path(stage.out_dir))
        for stage in stages
    ])


def side_by_side(cfg: PipelineConfig) -> bool:
    """`train.side_by_side`, or when unset: on a CPU with a core per run (each trains on one torch thread).

    verl runs and TRL runs on several GPUs never train side by side: each takes all the GPUs it is given.
    """
    if cfg.train.trainer == "verl" or cfg.train.trl.num_processes > 1:
        return False
    if cfg.train.side_by_side is not None:
        return cfg.train.side_by_side
    import torch

    return not torch.cuda.is_available() and (os.cpu_count() or 1) >= len(CONTINUATIONS)


def training_steps(cfg: PipelineConfig, kind: str) -> int:
    """GRPO steps of a run; the baseline defaults to the augmented run's count."""
    if kind == "baseline" and cfg.train.baseline_steps is None:
        return cfg.train.augmented_steps
    return getattr(cfg.train, STEP_FIELDS[kind])


def _init_model(cfg: PipelineConfig, run_dir: Path, kind: str, config_file: Path) -> Path | None:
    """The model a run starts from; None means the policy the world builds (on demand)."""
    if kind != "initial":
        initial = RunDir(run_dir).initial_checkpoint
        if not initial.is_dir():
            raise UserError(f"{initial}: not found; run `sws train initial --run {run_dir}` first")
        return initial
    if cfg.train.init_model:
        return Path(cfg.train.init_model).expanduser()
    if get_world(cfg.world).built_policy(cfg) is not None:
        return None
    raise UserError(
        f"{config_file}: field 'train.init_model' is empty; set it to the policy to train (a Hugging Face id or "
        "model folder)"
    )


def declaration(kind: str, **fields: Any) -> Stage:
    return Stage(**{
        "name": f"train_{kind}", "summary": f"GRPO-train the {kind} policy.",
        "run": functools.partial(run, kind=kind),
        "reads": (TRAINING_SETS[kind],),
        "writes": (f"train/{kind}/curve", "rollouts" if kind == "initial" else f"train/{kind}/rollouts"),
        "section": "train", "command": f"sws train {kind}", **fields,
    })


DECLARED_INITIAL = (declaration("initial", title="train initial"),)
# `sws run` trains augmented and baseline together, side by side where it can.
# The selected arm runs after them (`select.arm`).
DECLARED_CONTINUATIONS = (declaration("augmented", title="train augmented and baseline", run=run_continuations),
                          declaration("baseline", in_run=False),
                          declaration("selected", title="train selected", runs_when=lambda cfg: cfg.select.arm))
