"""One co-training step: context → S writes B cards → verify → R draws K rollouts per task (the valid cards,
topped up to the same number in every arm) → rewards → advantages → both GRPO updates (S's unless frozen) → the
step's pool rows and metrics row."""

from __future__ import annotations

import functools
import math
import random
import statistics
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from sws.cotrain.context import UNLISTED, Ledger, build_context
from sws.cotrain.daemon_call import DaemonCall
from sws.cotrain.grpo import group_advantages, trim_whole_groups
from sws.cotrain.learner import Learner, SamplingSettings, ScoredCompletion
from sws.cotrain.rewards import TEACHABILITY, TeachabilityCurve, synthesizer_reward
from sws.cotrain.top_up import TopUp
from sws.cotrain.verify import CardVerifier, Verdict
from sws.verifier import Verifier
from sws.world import World

SR_BINS = 4  # sr histogram over [0, 1] in quarters; 0 and 1 are also counted on their own


@dataclass(frozen=True)
class StepSettings:
    batch_size: int = 8  # B: cards S writes per step (one GRPO group)
    rollouts: int = 8  # K: rollouts of R per task
    # Tasks R trains on per step in every arm (None: B): the step's valid cards, topped up (`top_up.py`).
    reasoner_tasks: int | None = None
    update_synthesizer: bool = True  # the frozen arm's one switch
    shuffle_synthesizer_rewards: bool = False  # the negative control: S's rewards permuted within the batch
    require_solution: bool = False  # a card without a worked solution is rejected (`no_solution`)
    teachability: TeachabilityCurve = "synco"
    data_parallel_size: int = 1  # R's batch is trimmed, by whole groups, to a multiple of this
    synthesizer_sampling: SamplingSettings = field(default_factory=lambda: SamplingSettings(1.0, 48))
    reasoner_sampling: SamplingSettings = field(default_factory=lambda: SamplingSettings(1.0, 16))

    def __post_init__(self) -> None:
        if self.rollouts < 2:
            raise ValueError(f"rollouts is {self.rollouts}; GRPO needs K ≥ 2 rollouts per task")
        if self.batch_size < 2:
            raise ValueError(f"batch_size is {self.batch_size}; S's group needs at least 2 cards")
        if self.tasks_per_step < self.batch_size:
            raise ValueError(f"reasoner_tasks is {self.reasoner_tasks}; every valid card of a step is solved, so it "
                             f"must be at least batch_size ({self.batch_size})")

    @property
    def tasks_per_step(self) -> int:
        return self.batch_size if self.reasoner_tasks is None else self.reasoner_tasks


@dataclass
class StepResult:
    pool_rows: list[dict]
    metrics: dict


def is_correct(verifier: Verifier, label: str, completion: str) -> bool:
    answer = verifier.extract(completion)
    return answer is not None and verifier.spelling(answer) == verifier.spelling(label)


def reasoner_prompt(world: World, problem: str) -> str:
    """The policy's prompt as one text (learners take text): a chat world's single user message's content."""
    request = world.policy_prompt(problem)
    if "prompt" in request:
        return request["prompt"]
    [message] = request["messages"]
    return message["content"]


def run_step(step: int, first_task_id: int, synthesizer: Learner, reasoner: Learner, cards_verifier: CardVerifier,
             world: World, ledger: Ledger, categories: Sequence[str], settings: StepSettings,
             rng: random.Random, top_up: TopUp) -> StepResult:
    seconds: dict[str, float] = {}
    tokens = {"generate": 0, "solve": 0, "update": 0}
    clock = time.perf_counter()
    context = build_context(ledger, list(categories))
    context_hash = context.digest()
    cards = synthesizer.sample([context.render()], settings.batch_size, settings.synthesizer_sampling)[0]
    seconds["generate"], clock = time.perf_counter() - clock, time.perf_counter()
    tokens["generate"] = sum(card.tokens for card in cards)

    verdicts = cards_verifier.verify_batch([card.text for card in cards])
    seconds["verify"], clock = time.perf_counter() - clock, time.perf_counter()

    valid = [v for v in verdicts if v.valid]
    replayed, from_seed_set = top_up.draw(settings.tasks_per_step - len(valid), rng)
    tasks = [(v.problem, v.answer) for v in valid] + replayed + from_seed_set
    rollouts = reasoner.sample([reasoner_prompt(world, problem) for problem, _ in tasks], settings.rollouts,
                               settings.reasoner_sampling) if tasks else []
    correct = [[is_correct(world.verifier, label, c.text) for c in group]
               for (_, label), group in zip(tasks, rollouts, strict=True)]
    seconds["solve"], clock = time.perf_counter() - clock, time.perf_counter()
    tokens["solve"] = sum(completion.tokens for group in rollouts for completion in group)

    flags_of = {id(v): flags for v, flags in zip(valid, correct[:len(valid)], strict=True)}
    rewards = [synthesizer_reward(v.valid, v.quality, v.reliability,
                                  sum(flags_of.get(id(v), ())) / settings.rollouts, settings.teachability)
               for v in verdicts]
    trained_rewards = rng.sample(rewards, len(rewards)) if settings.shuffle_synthesizer_rewards else rewards

    reasoner_rows = [(task, completion, float(flag)) for task, (group, flags) in enumerate(zip(rollouts, correct, strict=True))
                     for completion, flag in zip(group, flags, strict=True)]
    kept = trim_whole_groups([task for task, _, _ in reasoner_rows], settings.data_parallel_size)
    reasoner_rows = [reasoner_rows[i] for i in kept]
    # The two updates are independent, so S's runs beside R's (another core here, another request in flight on
    # a server): the co-trained step then costs little more than the frozen one.
    synthesizer_update = None
    if settings.update_synthesizer:
        advantages = group_advantages(trained_rewards, [step] * len(cards))
        batch = [ScoredCompletion(card, advantage) for card, advantage in zip(cards, advantages, strict=True)]
        update = functools.partial(_update, synthesizer, batch, settings.synthesizer_sampling)
        synthesizer_update = DaemonCall(update, "synthesizer-update")
        tokens["update"] += tokens["generate"]
    if reasoner_rows:
        advantages = group_advantages([reward for _, _, reward in reasoner_rows],
                                      [task for task, _, _ in reasoner_rows])
        _update(reasoner, [ScoredCompletion(completion, advantage) for (_, completion, _), advantage
                           in zip(reasoner_rows, advantages, strict=True)], settings.reasoner_sampling)
        tokens["update"] += sum(completion.tokens for _, completion, _ in reasoner_rows)
    if synthesizer_update is not None:
        synthesizer_update.result()
    seconds["update"] = time.perf_counter() - clock

    _record_in_ledger(ledger, verdicts, valid, [flags_of[id(v)] for v in valid])  # the step's cards alone
    pool_rows = [_pool_row(step, slot, first_task_id + slot, context_hash, verdict, settings,
                           flags_of.get(id(verdict)), reward)
                 for slot, (verdict, reward) in enumerate(zip(verdicts, rewards, strict=True))]
    reasoner_work = {"reasoner_rollouts": sum(map(len, rollouts)), "replayed_tasks": len(replayed),
                     "seed_set_tasks": len(from_seed_set)}
    return StepResult(pool_rows, {**_metrics(step, pool_rows, verdicts, rewards, seconds, tokens), **reasoner_work})


def _update(learner: Learner, batch: Sequence[ScoredCompletion], settings: SamplingSettings) -> None:
    learner.forward_backward(batch, settings)
    learner.optim_step()
    learner.sync_weights()


def _record_in_ledger(ledger: Ledger, verdicts: Sequence[Verdict], valid: Sequence[Verdict],
                      correct: Sequence[Sequence[bool]]) -> None:
    by_category: dict[str, list[bool]] = {}
    unsolved: list[str] = []
    for verdict, flags in zip(valid, correct, strict=True):
        by_category.setdefault(verdict.category or UNLISTED, []).extend(flags)
        if not any(flags):
            unsolved.extend(verdict.concepts)
    ledger.record_step({c: sum(f) / len(f) for c, f in by_category.items()}, unsolved,
                       [v.category or UNLISTED for v in valid], [v.reject_reason for v in verdicts if not v.valid],
                       len(verdicts))


def _pool_row(step: int, slot: int, task_id: int, context_hash: str, verdict: Verdict, settings: StepSettings,
              flags: Sequence[bool] | None, reward: float) -> dict:
    k = settings.rollouts if flags is not None else 0
    n_correct = sum(flags) if flags is not None else None
    sr = n_correct / k if n_correct is not None else None
    return {"step": step, "slot": slot, "task_id": task_id, "context_hash": context_hash,
            "problem": verdict.problem, "answer": verdict.answer, "synth_answer": verdict.synth_answer,
            "solution": verdict.solution, "solution_answer": verdict.solution_answer,
            "category": verdict.category, "valid": verdict.valid, "reject_reason": verdict.reject_reason,
            "quality": verdict.quality, "quality_reason": verdict.quality_reason, "reliability": verdict.reliability,
            "k": k,
            "n_correct": n_correct, "sr": sr,
            "teachability": None if sr is None else TEACHABILITY[settings.teachability](sr),
            "reward": reward}


def _metrics(step: int, rows: Sequence[dict], verdicts: Sequence[Verdict], rewards: Sequence[float],
             seconds: dict[str, float], tokens: dict[str, int]) -> dict:
    generated = len(rows)
    valid = [row for row in rows if row["valid"]]
    productive = sum(0 < row["sr"] < 1 for row in valid)
    never_solved = sum(row["sr"] == 0 for row in valid)
    duplicates = sum(row["reject_reason"] == "duplicate" for row in rows)
    histogram = [0] * SR_BINS
    for row in valid:
        histogram[min(int(row["sr"] * SR_BINS), SR_BINS - 1)] += 1
    categories = Counter(row["category"] for row in valid)
    entropy = -sum(n / len(valid) * math.log(n / len(valid)) for n in categories.values()) if valid else 0.0
    audited = [verdict.synth_agrees for verdict in verdicts if verdict.valid and verdict.synth_agrees is not None]
    return {
        "step": step, "generated": generated, "valid": len(valid), "acceptance": len(valid) / generated,
        "productive": productive, "productive_rate": productive / generated,
        "productive_of_valid": _per_valid(productive, valid), "sr_zero": never_solved,
        "never_solved_of_valid": _per_valid(never_solved, valid), "sr_one": sum(row["sr"] == 1 for row in valid),
        "duplicates": duplicates, "duplicates_of_valid": _per_valid(duplicates, valid),
        "sr_histogram": histogram,
        "synth_reward_mean": statistics.fmean(rewards), "synth_reward_std": statistics.pstdev(rewards),
        "distinct_problems": len({row["problem"] for row in rows}) / generated,
        "category_entropy": entropy,
        "synth_label_error": (audited.count(False) / len(audited)) if audited else None,
        **{f"seconds_{phase}": value for phase, value in seconds.items()},
        **{f"tokens_{phase}": value for phase, value in tokens.items()},
    }


def _per_valid(count: int, valid: Sequence[dict]) -> float | None:
    """A count per valid task of the step; None (not 0) for a step without one."""
    return count / len(valid) if valid else None
