"""Run one co-training arm for its steps, checkpointing after every step so that a kill loses at most one.

The checkpoint folder holds both policies (weights and optimizer), the torch and Python RNG states, the ledger,
the verifier's recent tasks and the pool and metrics rows up to its step. It is written beside the live one and
swapped in by renames, so a kill at any instant leaves one whole checkpoint; a rerun continues from it and draws
exactly what an uninterrupted run would have drawn. A checkpoint made under other settings is started over. At the end the reasoner answers the validation tasks, which
the verifier holds as benchmark texts, so no card that repeats one is ever trained on.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from sws.atomic_files import fsync, write_text
from sws.cotrain.backend import CotrainBackendConfig, make_learner
from sws.cotrain.context import Ledger
from sws.cotrain.labeler import ConsistencyLabeler
from sws.cotrain.learner import Learner, SamplingSettings
from sws.cotrain.loop import StepSettings, is_correct, reasoner_prompt, run_step
from sws.cotrain.seed_cards import SeedCards
from sws.cotrain.top_up import TopUp
from sws.cotrain.verify import CardVerifier
from sws.training.tracking import step_logger
from sws.world import World

LIVE, NEW, OLD = "live", "new", "old"
STATE_FILE = "state.json"
TORCH_RNG_FILE = "torch_rng.pt"


@dataclass(frozen=True)
class ValidationTask:
    problem: str
    answer: str
    category: str


@dataclass(frozen=True)
class ArmRun:
    checkpoints: Path  # the arm's checkpoint folder (the live checkpoint and, during a swap, the new or old one)
    synthesizer: Path | None  # initial weights of each policy (None on a Tinker server: its base model)
    reasoner: Path | None
    steps: int
    seed: int
    settings: StepSettings
    categories: tuple[str, ...]
    synthesizer_learning_rate: float
    reasoner_learning_rate: float
    validation: tuple[ValidationTask, ...]
    validation_rollouts: int
    # The static arm: the seed set's (problem, answer) pairs stand in for the synthesizer's cards.
    seed_tasks: tuple[tuple[str, str], ...] | None = None
    # The seed set's (problem, answer) pairs, which top up a step's reasoner tasks in every arm (`top_up.py`).
    top_up_tasks: tuple[tuple[str, str], ...] = ()
    # Labels the cards when the world computes none (`World.truth` None); None: the world's truth labels them.
    labeler: ConsistencyLabeler | None = None
    # What decides the run; a checkpoint of another identity is discarded, never resumed.
    identity: str = ""
    # Where the two policies train: this process, or a Tinker-API server.
    backend: CotrainBackendConfig = field(default_factory=CotrainBackendConfig)
    # `train.report_to`: the tracker each step's metrics go to, under `arm_folder`'s tracking folder.
    report_to: str = "none"
    arm_folder: Path | None = None


@dataclass
class ArmResult:
    pool: list[dict]
    metrics: list[dict]
    validation: list[dict]
    resumed_from_step: int


@dataclass
class _State:
    step: int  # steps done
    ledger: Ledger
    recent: list[str]
    rng: random.Random
    pool: list[dict]
    metrics: list[dict]


def run_arm(run: ArmRun, world: World) -> ArmResult:
    _recover_swap(run.checkpoints)
    live = run.checkpoints / LIVE
    if (live / STATE_FILE).exists() and json.loads((live / STATE_FILE).read_text())["identity"] != run.identity:
        shutil.rmtree(live)
    synthesizer: Learner = (SeedCards(run.seed_tasks, run.seed) if run.seed_tasks is not None
                            else make_learner(run.backend, "synthesizer", run.synthesizer, run.synthesizer_learning_rate,
                                         run.seed))
    try:
        reasoner = make_learner(run.backend, "reasoner", run.reasoner, run.reasoner_learning_rate, run.seed)
    except BaseException:
        synthesizer.close(succeeded=False)
        raise
    state = (_load(live, synthesizer, reasoner) if (live / STATE_FILE).exists()
             else _State(0, Ledger(), [], random.Random(run.seed), [], []))
    resumed_from_step = state.step
    # The seed set repeats by design, so the static arm dedups within a batch only.
    cards_verifier = CardVerifier(run.labeler or world.truth, [task.problem for task in run.validation], run.categories,
                                  world.verifier, recent_window=0 if run.seed_tasks is not None else 2000,
                                  require_solution=run.settings.require_solution)
    cards_verifier.restore(state.recent)
    logger = (step_logger(run.report_to, run.arm_folder, run.arm_folder.name)
              if run.arm_folder is not None and state.step < run.steps else None)
    succeeded = False
    try:
        while state.step < run.steps:
            result = run_step(state.step, len(state.pool), synthesizer, reasoner, cards_verifier, world,
                              state.ledger, run.categories, run.settings, state.rng,
                              TopUp.of(state.pool, run.top_up_tasks, cards_verifier.is_contaminated))
            state.pool += result.pool_rows
            state.metrics.append(result.metrics)
            state.step += 1
            state.recent = cards_verifier.recent()
            _save(run.checkpoints, run.identity, state, synthesizer, reasoner)
            if logger is not None:
                logger.log(result.metrics, state.step)
        validation = answer_validation(reasoner, run.validation, run.validation_rollouts,
                                       run.settings.reasoner_sampling, world)
        succeeded = True
    finally:
        if logger is not None:
            logger.close()
        synthesizer.close(succeeded)
        reasoner.close(succeeded)
    return ArmResult(state.pool, state.metrics, validation, resumed_from_step)


def answer_validation(reasoner: Learner, tasks: Sequence[ValidationTask], rollouts: int,
                      sampling: SamplingSettings, world: World) -> list[dict]:
    """Held-out accuracy: `rollouts` answers of the reasoner (trained, or the initial one) per validation task."""
    if not tasks:
        return []
    prompts = [reasoner_prompt(world, task.problem) for task in tasks]
    answers = reasoner.sample(prompts, rollouts, sampling)
    rows = []
    for index, (task, group) in enumerate(zip(tasks, answers, strict=True)):
        n_correct = sum(is_correct(world.verifier, task.answer, completion.text) for completion in group)
        rows.append({"task_id": index, "problem": task.problem, "answer": task.answer, "category": task.category,
                     "k": len(group), "n_correct": n_correct, "accuracy": n_correct / len(group)})
    return rows


def _recover_swap(folder: Path) -> None:
    """Finish or undo a swap a kill interrupted: keep the newest whole checkpoint."""
    live, new, old = folder / LIVE, folder / NEW, folder / OLD
    if not live.exists() and old.exists():
        os.replace(old, live)
    for leftover in (new, old):
        if leftover.exists():
            shutil.rmtree(leftover)


def _save(folder: Path, identity: str, state: _State, synthesizer: Learner, reasoner: Learner) -> None:
    live, new, old = folder / LIVE, folder / NEW, folder / OLD
    if new.exists():
        shutil.rmtree(new)
    synthesizer.save(new / "synthesizer")
    reasoner.save(new / "reasoner")
    torch.save(torch.get_rng_state(), new / TORCH_RNG_FILE)
    version, internal, gauss = state.rng.getstate()
    # key order kept (not sorted): the ledger's ties break by first appearance, on resume too
    write_text(new / STATE_FILE, json.dumps({
        "identity": identity, "step": state.step, "ledger": state.ledger.to_json(), "recent": state.recent,
        "rng": [version, list(internal), gauss], "pool": state.pool, "metrics": state.metrics}))
    fsync(new)
    if live.exists():
        os.replace(live, old)
    os.replace(new, live)
    fsync(folder)
    if old.exists():
        shutil.rmtree(old)


def _load(live: Path, synthesizer: Learner, reasoner: Learner) -> _State:
    synthesizer.load(live / "synthesizer")
    reasoner.load(live / "reasoner")
    torch.set_rng_state(torch.load(live / TORCH_RNG_FILE, weights_only=True))
    saved = json.loads((live / STATE_FILE).read_text())
    version, internal, gauss = saved["rng"]
    rng = random.Random()
    rng.setstate((version, tuple(internal), gauss))
    return _State(saved["step"], Ledger.from_json(saved["ledger"]), saved["recent"], rng, saved["pool"],
                  saved["metrics"])


def validation_tasks(rows: Sequence[dict]) -> tuple[ValidationTask, ...]:
    return tuple(ValidationTask(row["problem"], row["answer"], row["category"]) for row in rows)
