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
    """A TRL reward function that also logs one rollout row per group of `group_size` completions.

    TRL calls it with the batch's dataset columns (`answer`, `problem_id`) and the trainer state; each run of
    `group_size` consecutive completions is one prompt's rollout group. The rows are logged under step
    `global_step + 1`, the optimizer step these rollouts feed.
    """

    __name__ = "correct"

    def __init__(self, log: RolloutLog, group_size: int) -> None:
        self.log = log
        self.group_size = group_size

    def __call__(
        self, prompts: list[Any], completions: list[Any], answer: list[str], problem_id: list[str],
        trainer_state: Any, **_: Any,
    ) -> list[float]:
        verdicts = grade_completions(answer, [completion_text(completion) for completion in completions])
        step = trainer_state.global_step + 1
        for start in range(0, len(verdicts), self.group_size):
            group = problem_id[start:start + self.group_size]
            if len(set(group)) != 1:
                raise RuntimeError(f"rollout group at {start} mixes problems {sorted(set(group))}")
            self.log.record(step, group[0], len(group), sum(verdicts[start:start + self.group_size]))
        return [float(verdict) for verdict in verdicts]
