"""The verifiable reward: 1 when a completion's final answer is equivalent to the reference answer, else 0.

A completion whose grading ran out of time (ungraded) also gets 0, since GRPO needs a number, but the rollout
log leaves it out of its group's `n`: it is not a wrong sample. Grading goes through `sws.grading` (answer
extraction, math-verify equivalence in worker processes, plain integers compared as text in-process).
"""

from __future__ import annotations

from typing import Any

from sws.grading import Verdict, grade_completions, graded_count
from sws.training.rollout_log import RolloutLog


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
    process logs each problem's graded completions and correct ones under step `global_step + 1`, the optimizer
    step these rollouts feed (a group with no graded completion logs no row). A generation batch draws every
    problem at most once.

    With a `band` (train.online_filter), a group whose accuracy over its graded completions lies outside it (or
    with none graded) is dropped: its problem joins `dropped`, which `BandFilter` reads to leave the group out
    of the update, and its log row says so.
    """

    __name__ = "correct"

    def __init__(self, log: RolloutLog, group_size: int, band: tuple[float, float] | None = None) -> None:
        self.log = log
        self.group_size = group_size
        self.band = band
        self.dropped: set[str] = set()

    def __call__(
        self, prompts: list[Any], completions: list[Any], answer: list[str], problem_id: list[str],
        trainer_state: Any, **_: Any,
    ) -> list[float]:
        from accelerate.utils import gather_object

        verdicts = grade_completions(answer, [completion_text(completion) for completion in completions])
        everyones = gather_object(list(zip(problem_id, verdicts, strict=True)))
        step = trainer_state.global_step + 1
        self.dropped = set()
        for problem, group in _groups(everyones).items():
            if len(group) != self.group_size:
                raise RuntimeError(f"problem {problem} has {len(group)} completions in a step, not one group "
                                   f"of {self.group_size}")
            n, n_correct = graded_count(group)
            dropped = self.band is not None and not (n and self.band[0] <= n_correct / n <= self.band[1])
            if dropped:
                self.dropped.add(problem)
            if n and trainer_state.is_world_process_zero:
                self.log.record(step, problem, n, n_correct, dropped)
        return [1.0 if verdict is True else 0.0 for verdict in verdicts]


def _groups(verdicts: list[tuple[str, Verdict]]) -> dict[str, list[Verdict]]:
    """The verdicts of each problem's completions, problems in order of first appearance."""
    groups: dict[str, list[Verdict]] = {}
    for problem, verdict in verdicts:
        groups.setdefault(problem, []).append(verdict)
    return groups
