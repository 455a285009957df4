"""TRL's reward function: the world's verdicts on a generation batch, the rollout log, then the chosen reward.

Every completion is graded by the world's verifier (`sws.grading`: answer extraction, equivalence in worker
processes with a deadline). A completion whose grading ran out of time (ungraded) is left out of its group's `n`
in the rollout log: it is not a wrong sample. The registered reward (`train.reward`, `sws.training.rewards`)
turns the verdicts (and whatever else it reads of the batch) into the numbers GRPO trains on.
"""

from __future__ import annotations

from typing import Any

from sws.grading import Verdict, grade_completions, graded_count, shared_pool
from sws.training.rewards import Reward, RewardBatch
from sws.training.rollout_log import RolloutLog
from sws.verifier import Verifier


def completion_text(completion: str | list[dict[str, str]]) -> str:
    """The text of a TRL completion: a string, or (for chat prompts) a list of messages."""
    if isinstance(completion, str):
        return completion
    return "".join(message["content"] for message in completion)


class CorrectnessReward:
    """A TRL reward function: the world verifier's verdict on every completion, one rollout row per problem of
    the generation batch from those verdicts, and the numbers of `reward` (the registered `train.reward`).

    TRL calls it with the batch's dataset columns (`problem_id`, `problem`, `answer`) and the trainer state, once
    per generation batch (all of a step's completions). With several processes each holds a slice, and a
    prompt's group of `group_size` completions may be split between them; the verdicts are gathered, and the main
    process logs each problem's graded completions and correct ones under step `global_step + 1`, the optimizer
    step these rollouts feed (a group with no graded completion logs no row). A generation batch draws every
    problem at most once.

    With a `band` (train.online_filter), a group whose accuracy over its graded completions lies outside it (or
    with none graded) is dropped: its problem joins `dropped`, which `BandFilter` reads to leave the group out
    of the update, and its log row says so. TRL names the reward's metrics after `name`.
    """

    def __init__(self, log: RolloutLog, group_size: int, verifier: Verifier, reward: Reward, name: str,
                 band: tuple[float, float] | None = None) -> None:
        self.log = log
        self.group_size = group_size
        self.verifier = verifier
        self.reward = reward
        self.__name__ = name
        self.band = band
        self.dropped: set[str] = set()

    def __call__(
        self, prompts: list[Any], completions: list[Any], answer: list[str], problem_id: list[str],
        problem: list[str], trainer_state: Any, **_: Any,
    ) -> list[float]:
        from accelerate.utils import gather_object

        texts = [completion_text(completion) for completion in completions]
        verdicts = grade_completions(answer, texts, shared_pool(self.verifier))
        everyones = gather_object(list(zip(problem_id, verdicts, strict=True)))
        step = trainer_state.global_step + 1
        self.dropped = set()
        for problem_key, group in _groups(everyones).items():
            if len(group) != self.group_size:
                raise RuntimeError(f"problem {problem_key} has {len(group)} completions in a step, not one group "
                                   f"of {self.group_size}")
            n, n_correct = graded_count(group)
            dropped = self.band is not None and not (n and self.band[0] <= n_correct / n <= self.band[1])
            if dropped:
                self.dropped.add(problem_key)
            if n and trainer_state.is_world_process_zero:
                self.log.record(step, problem_key, n, n_correct, dropped)
        rows = [{"problem_id": key, "problem": text, "answer": reference}
                for key, text, reference in zip(problem_id, problem, answer, strict=True)]
        return self.reward(RewardBatch(texts, rows, verdicts, self.verifier))


def _groups(verdicts: list[tuple[str, Verdict]]) -> dict[str, list[Verdict]]:
    """The verdicts of each problem's completions, problems in order of first appearance."""
    groups: dict[str, list[Verdict]] = {}
    for problem, verdict in verdicts:
        groups.setdefault(problem, []).append(verdict)
    return groups
