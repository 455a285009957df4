"""`sws cotrain_<arm>`: SynCo co-training of a synthesizer and the reasoner, one stage per arm of
`sws.cotrain.arms` (co-trained, frozen, static, shuffled). In this process (`cotrain.backend: local`) the world
must bring a warm-started synthesizer (`World.synthesizer`: the arith world, on CPU); on a Tinker-API server both
policies are adapters of the server's base model. A world that computes its own labels (`World.truth`) labels the
cards; otherwise the `labeler` role does, by its consistent samples (`sws.cotrain.labeler`).

Locally each arm starts from the world's warm-started policy (or `train.init_model`) as the reasoner and the
world's warm-started synthesizer, runs `cotrain.steps` steps (`sws.cotrain.session`, checkpointed every step in
`cotrain/<arm>/checkpoints`, so a killed run resumes losing at most a step), and writes every candidate task
(`cotrain/<arm>/pool`), the metrics per step (`cotrain/<arm>/metrics`) and the reasoner's answers to held-out
tasks of the seed categories (`cotrain/<arm>/validation`), which the verifier keeps out of the training pool.
Before the arms, `sws cotrain_initial` has the initial reasoner answer the same tasks
(`cotrain/initial/validation`), which splits them for every arm into those it solved (Retain) and not (Learn).
"""

from __future__ import annotations

import functools
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl

from sws.config import CotrainConfig, PipelineConfig
from sws.cotrain.arms import COTRAIN_ARMS, INITIAL_VALIDATION, CotrainArm
from sws.cotrain.labeler import ConsistencyLabeler, labeled_by_samples
from sws.cotrain.summary import second_half
from sws.errors import UserError
from sws.llm_calls import engine_for
from sws.run_dir import RunDir
from sws.runner import StageContext, StageOutput
from sws.stage import Stage
from sws.stages.label import template as label_template
from sws.tables import COTRAIN_METRICS, COTRAIN_POOL, COTRAIN_VALIDATION
from sws.training.tracking import require_tracker
from sws.world import BuiltPolicy, World, get_world

EXCLUDED_SETTINGS = {"arms": True, "only": True}
INITIAL_SETTINGS = {"backend", "reasoner", "reasoner_temperature", "reasoner_max_tokens", "reasoner_system_prompt",
                    "validation_per_category", "validation_rollouts"}


def is_on(arm: CotrainArm, cfg: PipelineConfig) -> bool:
    return arm.name in cfg.cotrain.arms


def world_synthesizer(world: World, cfg: PipelineConfig, config_file: Path | str) -> BuiltPolicy | None:
    """The world's synthesizer for the local backend (None on a Tinker server, whose base model is the
    synthesizer), or one line saying that this world cannot co-train in this process."""
    if cfg.cotrain.backend == "tinker":
        return None
    synthesizer = world.synthesizer(cfg)
    if synthesizer is None:
        raise UserError(f"{config_file}: field 'cotrain.backend' is 'local', but world {cfg.world!r} brings no "
                        "synthesizer to co-train in this process; set cotrain.backend: tinker (with "
                        "cotrain.synthesizer and cotrain.reasoner), or world: arith")
    return synthesizer


def card_roles(cfg: PipelineConfig) -> tuple[str, ...]:
    """The roles labeling the cards calls: the labeler where the world computes no labels."""
    return ("labeler",) if labeled_by_samples(get_world(cfg.world)) else ()


def label_settings(cfg: PipelineConfig) -> dict[str, Any]:
    return {"labeler": cfg.roles.labeler.model_dump(mode="json") if cfg.roles.labeler else None,
            "label_samples": cfg.synthesize.label_samples, "min_consistency": cfg.synthesize.min_consistency,
            "label_prompt": label_template(cfg).digest}


@contextmanager
def card_labeler(world: World, cfg: PipelineConfig, run: RunDir) -> Iterator[ConsistencyLabeler | None]:
    """The labeler of the cards (None: the world's truth labels them), its engine behind the run's cache. That
    the role is set, preflight checked (`card_roles`)."""
    if not labeled_by_samples(world):
        yield None
        return
    with engine_for(cfg.roles.labeler, run.root) as engine:
        yield ConsistencyLabeler(engine, cfg.roles.labeler, label_template(cfg), cfg.synthesize.label_samples,
                                 cfg.synthesize.min_consistency, world.verifier, cfg.seed)


def reasoner_identity(cfg: PipelineConfig) -> str | None:
    if cfg.train.init_model:
        return str(Path(cfg.train.init_model).expanduser())
    built = get_world(cfg.world).built_policy(cfg)
    return built.identity if built is not None else None


def settings(arm: CotrainArm, cfg: PipelineConfig, options: dict) -> dict[str, Any]:
    world = get_world(cfg.world)
    labels = {"labels": label_settings(cfg)} if labeled_by_samples(world) else {}
    return {**labels, "arm": arm.name, "world": cfg.world, "seed": cfg.seed,
            "cotrain": cfg.cotrain.model_dump(mode="json", exclude=EXCLUDED_SETTINGS),
            "synthesizer": synthesizer.identity if (synthesizer := world.synthesizer(cfg)) else None,
            "reasoner": reasoner_identity(cfg)}


def reasoner_files(cfg: PipelineConfig, run: RunDir) -> list[Path]:
    start = Path(cfg.train.init_model).expanduser() if cfg.train.init_model else None
    return [start] if start is not None and start.is_dir() else []


def checkpoints(arm: CotrainArm, cfg: PipelineConfig, run: RunDir, options: dict) -> list[Path]:
    return [run.cotrain_checkpoints(arm.name)]


def reasoner_sampling(section: CotrainConfig) -> Any:
    # The loop imports torch, which the CLI loads only when a stage trains.
    from sws.cotrain.learner import SamplingSettings

    return SamplingSettings(section.reasoner_temperature, section.reasoner_max_tokens, section.reasoner_system_prompt)


def step_settings(arm: CotrainArm, section: CotrainConfig) -> Any:
    from sws.cotrain.learner import SamplingSettings
    from sws.cotrain.loop import StepSettings

    return StepSettings(
        batch_size=section.batch_size, rollouts=section.rollouts, reasoner_tasks=section.reasoner_tasks,
        require_solution=section.require_solution, update_synthesizer=arm.update_synthesizer,
        shuffle_synthesizer_rewards=arm.shuffle_synthesizer_rewards, teachability=section.teachability,
        data_parallel_size=section.data_parallel_size,
        synthesizer_sampling=SamplingSettings(section.synthesizer_temperature, section.synthesizer_max_tokens,
                                              section.synthesizer_system_prompt),
        reasoner_sampling=reasoner_sampling(section))


def seed_problems(context: StageContext) -> pl.DataFrame:
    problems = context.table("problems")
    if problems.height == 0:
        raise UserError(f"{context.source('problems')}: no seed problems; rebuild it with `sws prepare`")
    return problems


def reasoner_start(cfg: PipelineConfig, world: World) -> Path | None:
    """The reasoner's initial weights in this process; None on a Tinker server (its base model)."""
    if cfg.cotrain.backend == "tinker":
        return None
    return Path(cfg.train.init_model).expanduser() if cfg.train.init_model else world.built_policy(cfg).build()


def held_out_tasks(cfg: PipelineConfig, world: World, problems: pl.DataFrame) -> Any:
    from sws.cotrain.session import validation_tasks

    return validation_tasks(world.fresh_problems(cfg, problems, cfg.cotrain.validation_per_category).to_dicts())


def cotrain_arm(arm: CotrainArm, context: StageContext) -> StageOutput:
    from sws.cotrain.session import ArmRun, run_arm

    cfg, run, section, world = context.cfg, context.run, context.cfg.cotrain, context.world
    synthesizer = world_synthesizer(world, cfg, run.config)
    require_tracker(cfg.train.report_to, run.config)
    problems = seed_problems(context)
    folder = run.cotrain_checkpoints(arm.name)
    if context.force and folder.exists():
        shutil.rmtree(folder)
    seed_set = tuple(zip(problems["problem"], problems["answer"], strict=True))
    with card_labeler(world, cfg, run) as labeler:
        result = run_arm(ArmRun(
            checkpoints=folder, synthesizer=synthesizer.build() if synthesizer is not None else None,
            reasoner=reasoner_start(cfg, world), labeler=labeler, steps=section.steps, seed=cfg.seed,
            settings=step_settings(arm, section), categories=tuple(sorted(set(problems["category"]))),
            synthesizer_learning_rate=section.synthesizer_learning_rate,
            reasoner_learning_rate=section.reasoner_learning_rate,
            validation=held_out_tasks(cfg, world, problems), validation_rollouts=section.validation_rollouts,
            seed_tasks=seed_set if arm.seed_set else None, top_up_tasks=seed_set,
            identity=context.identity, backend=section, report_to=cfg.train.report_to,
            arm_folder=folder.parent), world)
    pool = pl.DataFrame(result.pool, schema=COTRAIN_POOL, orient="row")
    metrics = pl.DataFrame(result.metrics, schema=COTRAIN_METRICS, orient="row")
    answers = pl.DataFrame(result.validation, schema=COTRAIN_VALIDATION, orient="row")
    half = second_half(metrics)
    return StageOutput(
        tables={arm.pool: pool, arm.metrics: metrics, arm.validation: answers},
        info={"steps": section.steps, "resumed_from_step": result.resumed_from_step,
              "productive_rate_second_half": round(float(half["productive_rate"].mean() or 0.0), 4),
              "heldout_accuracy": round(float(answers["accuracy"].mean() or 0.0), 4)})


def initial_reasoner(context: StageContext) -> StageOutput:
    """The initial reasoner's answers to the arms' held-out tasks, drawn as an arm's trained reasoner draws them."""
    from sws.cotrain.backend import make_learner
    from sws.cotrain.session import answer_validation

    cfg, section, world = context.cfg, context.cfg.cotrain, context.world
    world_synthesizer(world, cfg, context.run.config)  # the arms' one line, before any of them, where none can run
    tasks = held_out_tasks(cfg, world, seed_problems(context))
    reasoner = make_learner(section, "reasoner", reasoner_start(cfg, world), section.reasoner_learning_rate, cfg.seed)
    succeeded = False
    try:
        rows = answer_validation(reasoner, tasks, section.validation_rollouts, reasoner_sampling(section), world)
        succeeded = True
    finally:
        reasoner.close(succeeded)
    answers = pl.DataFrame(rows, schema=COTRAIN_VALIDATION, orient="row")
    return StageOutput(tables={INITIAL_VALIDATION: answers},
                       info={"heldout_accuracy": round(float(answers["accuracy"].mean() or 0.0), 4),
                             "solved": int((answers["n_correct"] > 0).sum()), "tasks": answers.height})


def initial_settings(cfg: PipelineConfig, options: dict) -> dict[str, Any]:
    """What decides the initial reasoner's answers: not the steps, the synthesizer or the arms."""
    return {"world": cfg.world, "seed": cfg.seed, "reasoner": reasoner_identity(cfg),
            "cotrain": cfg.cotrain.model_dump(mode="json", include=INITIAL_SETTINGS)}


def any_arm_on(cfg: PipelineConfig) -> bool:
    return bool(cfg.cotrain.arms)


INITIAL = Stage(
    "cotrain_initial", "Answer the co-training held-out tasks with the initial reasoner (for Retain and Learn).",
    initial_reasoner, reads=("problems",), writes=(INITIAL_VALIDATION,), settings=initial_settings,
    input_files=reasoner_files, section="cotrain", float_results=True, title="cotrain initial reasoner",
    runs_when=any_arm_on, example="sws cotrain-initial --run runs/cotrain --config cotrain")


def declaration(arm: CotrainArm) -> Stage:
    return Stage(
        f"cotrain_{arm.name}", f"Co-train (SynCo) the {arm.name} arm: {arm.summary}.",
        functools.partial(cotrain_arm, arm), reads=("problems",), writes=(arm.pool, arm.metrics, arm.validation),
        settings=functools.partial(settings, arm), input_files=reasoner_files,
        output_files=functools.partial(checkpoints, arm), config_roles=card_roles, section="cotrain",
        float_results=True,
        title=f"cotrain {arm.name}", runs_when=functools.partial(is_on, arm),
        example=f"sws cotrain-{arm.name} --run runs/cotrain --config cotrain")


DECLARED = (INITIAL, *(declaration(arm) for arm in COTRAIN_ARMS))
