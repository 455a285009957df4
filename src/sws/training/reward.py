"""The verifiable reward: 1 when a completion's final answer is equivalent to the reference answer, else 0.

Grading goes through `sws.grading` (answer extraction, math-verify equivalence in worker processes). Plain
integers, the arith world's answers, are compared as numbers in-process, so a wrong integer answer does not
cost a round trip to a grading worker.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sws.grading import GradingPool, extract_answer, grade_many
from sws.training.rollout_log import RolloutLog

_PLAIN_INTEGER = re.compile(r"[+-]?\d+")


def grade_completions(answers: Sequence[str], completions: Sequence[str], pool: GradingPool | None = None) -> list[bool]:
    """For each (reference answer, model output) pair, whether the output's final answer is equivalent."""
    verdicts: list[bool] = [False] * len(completions)
    pending: list[int] = []
    predictions = [extract_answer(text) for text in completions]
    for index, (gold, pred) in enumerate(zip(answers, predictions, strict=True)):
        if pred is None:
            continue
        if _PLAIN_INTEGER.fullmatch(gold.strip()) and _PLAIN_INTEGER.fullmatch(pred):
            verdicts[index] = int(gold) == int(pred)
        else:
            pending.append(index)
    if pending:
        graded = grade_many([(answers[index], predictions[index]) for index in pending], pool)
        for index, verdict in zip(pending, graded, strict=True):
            verdicts[index] = verdict
    return verdicts


def grade_answer_pairs(pairs: list[Sequence[str]], pool: GradingPool) -> list[bool]:
    """A grading body for an executor (`sws.executors`): `grade_completions` over (answer, output) pairs."""
    return grade_completions([answer for answer, _ in pairs], [output for _, output in pairs], pool)


def completion_text(completion: str | list[dict[str, str]]) -> str:
    """The text of a TRL completion: a string, or (for chat prompts) a list of messages."""
    if isinstance(completion, str):
        return completion
    return "".join(message["content"] for message in completion)


class CorrectnessReward:
    """A TRL reward function that also logs one rollout row per problem of the generation batch.

    TRL calls it with the batch's dataset columns (`answer`, `problem_id`) and the trainer state, once per
    generation batch (all of a step's completions). With several processes each holds a slice, and a prompt's
    group of `group_size` completions may be split between them; the verdicts are gathered, and the main
    process logs each problem's completions and correct ones under step `global_step + 1`, the optimizer step
    these rollouts feed. A generation batch draws every problem at most once.
    """

    __name__ = "correct"

    def __init__(self, log: RolloutLog, group_size: int) -> None:
        self.log = log
        self.group_size = group_size

    def __call__(
        self, prompts: list[Any], completions: list[Any], answer: list[str], problem_id: list[str],
        trainer_state: Any, **_: Any,
    ) -> list[float]:
        from accelerate.utils import gather_object

        verdicts = grade_completions(answer, [completion_text(completion) for completion in completions])
        everyones = gather_object(list(zip(problem_id, verdicts, strict=True)))
        if trainer_state.is_world_process_zero:
            step = trainer_state.global_step + 1
            for problem, (n, n_correct) in _tally(everyones).items():
                if n != self.group_size:
                    raise RuntimeError(f"problem {problem} has {n} completions in a step, not one group of "
                                       f"{self.group_size}")
                self.log.record(step, problem, n, n_correct)
        return [float(verdict) for verdict in verdicts]


def _tally(verdicts: list[tuple[str, bool]]) -> dict[str, tuple[int, int]]:
    """Completions and correct ones per problem, in order of first appearance."""
    counts: dict[str, tuple[int, int]] = {}
    for problem, correct in verdicts:
        n, n_correct = counts.get(problem, (0, 0))
        counts[problem] = (n + 1, n_correct + int(correct))
    return counts
