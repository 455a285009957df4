"""`sws train <arm>`: the GRPO runs of the method, one stage `train_<arm>` per arm of `sws.arms.ARMS`.

- initial: from `train.init_model` (empty in the arith world: the bootstrapped tiny policy) on the seed problems
  → `train/initial/final`, plus `rollouts.parquet`, the rollout log `sws identify` reads;
- baseline, augmented, selected (with `select.arm`): from `train/initial/final` on their training sets (the seed
  problems, `augmented.parquet`, `selected_mix.parquet`), the baseline and selected as long as augmented.

A run reads its training set and the model it starts from, and writes its final model (`train/<arm>/final`, which
the trainer writes in place), its curve (`train/<arm>/curve`) and its rollout log; a killed run resumes from its
latest checkpoint when rerun. The arms of a side-by-side group (baseline and augmented) are one step of `sws run`,
`train_<group>`, that trains them at once where `train.side_by_side` allows. With `train.trainer: verl`, or TRL on
several GPUs, `dry_run` writes a run's launch (`train/<arm>/launch.sh`) without running it.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any

from sws import runner
from sws.arms import ARMS, Arm, arm, side_by_side_groups
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.manifests import StageResult
from sws.run_dir import RunDir
from sws.runner import StageContext, StageOutput
from sws.stage import Stage
from sws.training import TrainJob, progress_path, train, trainer_module
from sws.training.rewards import get_reward
from sws.world import get_world


def settings(trained: Arm, cfg: PipelineConfig, options: dict) -> dict[str, Any]:
    """What decides an arm's run besides its inputs. It leaves out the other trainer's settings, the memory the
    fit check assumes, the steps of other arms and the tracker."""
    not_deciding: dict[str, Any] = {each.steps_field: True for each in ARMS} | {"side_by_side": True,
                                                                                 "report_to": True}
    if cfg.train.trainer == "trl":
        not_deciding |= {"verl": True, "trl": {"device_memory_gb"}}
    else:
        not_deciding |= {"trl": True, "micro_batch_size": True}
    return {"kind": trained.name, "steps": trained.steps(cfg), "world": cfg.world, "seed": cfg.seed,
            "train": cfg.train.model_dump(mode="json", exclude=not_deciding), "init_model": start_identity(trained, cfg)}


def start_identity(trained: Arm, cfg: PipelineConfig) -> str | None:
    """The model an arm starts from, as its settings name it (the model's files are among its inputs)."""
    if trained.starts_from is not None:
        return str(RunDir("").checkpoint(trained.starts_from))
    if cfg.train.init_model:
        return str(Path(cfg.train.init_model).expanduser())
    built = get_world(cfg.world).built_policy(cfg)
    return built.identity if built is not None else None


def start_model(trained: Arm, cfg: PipelineConfig, run: RunDir) -> Path | None:
    """The model an arm starts from; None means the policy the world builds (on demand). A UserError when the run
    cannot start: the arm it continues from is not trained, or no model is named."""
    if trained.starts_from is not None:
        checkpoint = run.checkpoint(trained.starts_from)
        if not checkpoint.is_dir():
            raise UserError(f"{checkpoint}: not found; run `sws train {trained.starts_from} --run {run.root}` first")
        return checkpoint
    if cfg.train.init_model:
        return Path(cfg.train.init_model).expanduser()
    if get_world(cfg.world).built_policy(cfg) is not None:
        return None
    raise UserError(f"{run.config}: field 'train.init_model' is empty; set it to the policy to train (a Hugging Face "
                    "id or model folder)")


def start_files(trained: Arm, cfg: PipelineConfig, run: RunDir) -> list[Path]:
    start = start_model(trained, cfg, run)
    return [start] if start is not None and start.is_dir() else []


def final_model(trained: Arm, cfg: PipelineConfig, run: RunDir, options: dict) -> list[Path]:
    return [run.checkpoint(trained.name)]


def training_job(trained: Arm, context: StageContext) -> TrainJob:
    cfg, run = context.cfg, context.run
    problems = context.table(trained.training_set)
    if problems.height == 0:
        raise UserError(f"{context.source(trained.training_set)}: no problems to train on; rebuild it with its command")
    start = start_model(trained, cfg, run)
    return TrainJob(
        name=trained.name,
        problems=problems.select("problem_id", "problem", "answer", "category", "source"),
        init_model=start if start is not None else context.world.built_policy(cfg).build(),
        reward=get_reward(cfg.train.reward, run.config),
        out_dir=run.train(trained.name),
        steps=trained.steps(cfg),
        world=cfg.world,
        seed=cfg.seed,
        identity=context.identity,
        config_file=run.config,
        run_name=run.root.name,
        online_filter=trained.filters_online(cfg),
        beside_filtered=trained.starts_from is not None and cfg.train.online_filter is not None,
    )


def train_arm(trained: Arm, context: StageContext) -> StageOutput:
    """GRPO-train the arm: its final model (written in place), curve and rollout log."""
    job = training_job(trained, context)
    outcome = train(job, context.cfg.train, context.force)
    tail = outcome.curve.tail(max(1, outcome.curve.height // 10))
    return StageOutput(
        tables={trained.curve: outcome.curve, trained.rollouts: outcome.rollouts},
        info={
            "steps": job.steps,
            "final": str(outcome.final_dir),
            "resumed_from_step": outcome.resumed_from_step,
            "seconds_per_step": outcome.seconds_per_step,
            "final_mean_reward": round(float(tail["reward"].mean() or 0.0), 4),
        },
    )


def declaration(trained: Arm) -> Stage:
    return Stage(
        f"train_{trained.name}", f"GRPO-train the {trained.name} policy.", functools.partial(train_arm, trained),
        reads=(trained.training_set,), writes=(trained.curve, trained.rollouts),
        settings=functools.partial(settings, trained), input_files=functools.partial(start_files, trained),
        output_files=functools.partial(final_model, trained), section="train", float_results=True, command=f"sws train {trained.name}",
        title=f"train {trained.name}", runs_when=trained.runs_when, in_run=trained.side_by_side is None)


STAGES = {each.name: declaration(each) for each in ARMS}


def run_arm(name: str, cfg: PipelineConfig, run_dir: Path, force: bool = False) -> StageResult:
    """Train arm `name` (a module-level function by name, so that a side-by-side worker can run it)."""
    return runner.run(STAGES[name], cfg, run_dir, force)


def dry_run(cfg: PipelineConfig, run_dir: Path, name: str) -> str:
    """Write arm `name`'s launch (verl, or TRL on several GPUs) without running it; return its command."""
    trained = arm(name)
    context = runner.context(STAGES[name], cfg, run_dir)
    return trainer_module(cfg.train).prepare(training_job(trained, context), cfg.train)


def train_group(group: str, cfg: PipelineConfig, run_dir: Path, force: bool = False) -> list[StageResult]:
    """Train the group's arms that the config asks for, side by side when `train.side_by_side` allows."""
    members = [each for each in side_by_side_groups()[group] if each.is_on(cfg)]
    pending = [each for each in members if force or not runner.is_current(STAGES[each.name], cfg, run_dir)]
    if len(pending) < 2 or runner.is_planning() or not side_by_side(cfg, len(members)):
        return [run_arm(each.name, cfg, run_dir, force) for each in members]
    from sws.side_by_side import Task, run_side_by_side

    return run_side_by_side([
        Task(f"train {each.name}", run_arm, (each.name, cfg, run_dir, force),
             RunDir(run_dir).train(each.name) / "log.txt", progress_path(RunDir(run_dir).train(each.name)))
        for each in members
    ])


def side_by_side(cfg: PipelineConfig, runs: int) -> bool:
    """`train.side_by_side`, or when unset: on a CPU with a core per run (each trains on one torch thread).

    verl runs and TRL runs on several GPUs never train side by side: each takes all the GPUs it is given.
    """
    if cfg.train.trainer == "verl" or cfg.train.trl.num_processes > 1:
        return False
    if cfg.train.side_by_side is not None:
        return cfg.train.side_by_side
    import torch

    return not torch.cuda.is_available() and (os.cpu_count() or 1) >= runs


def group_declaration(group: str, members: tuple[Arm, ...]) -> Stage:
    names = " and ".join(each.name for each in members)
    return Stage(
        f"train_{group}", f"GRPO-train the {names} policies, side by side where they can.",
        drive=functools.partial(train_group, group), section="train", command="sws run PIPELINE",
        title=f"train {names}", runs_when=lambda cfg: any(each.is_on(cfg) for each in members))


# `sws run` trains the initial policy before identify, the others after export: each group as one step.
DECLARED_INITIAL = tuple(STAGES[each.name] for each in ARMS if each.starts_from is None)
DECLARED_CONTINUATIONS = (
    *(group_declaration(group, members) for group, members in side_by_side_groups().items()),
    *(STAGES[each.name] for each in ARMS if each.starts_from is not None),
)
