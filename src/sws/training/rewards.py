"""Training rewards, registered by name: `train.reward` picks one, as open-r1 picks its reward functions.

A reward takes a batch of rollouts (`RewardBatch`: each completion with its problem's row and the verdict of
the world's verifier on its final answer) and gives each completion a float. The trainers grade every
completion with the world's verifier anyway, for the rollout log (`step, problem_id, n, n_correct`) and verl's
`acc`, so a reward reads the verdicts instead of grading again. `correct` is the verifiable reward of the
method. Register another with `@register_reward("name")` on a module-level function (verl's reward module, and
the workers of a TRL run on several GPUs, import it by name).

Only the standard library is imported: verl's reward module calls rewards where sws's dependencies are not
installed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sws.errors import UserError
from sws.grading import Verdict
from sws.verifier import Verifier


@dataclass(frozen=True)
class RewardBatch:
    """Completions to reward, with per completion its problem's row (at least `problem_id` and `answer`; TRL's
    also `problem`, verl's the dataset's `extra_info` and `data_source`) and the world's verdict on its final
    answer (None: its grading ran out of time)."""

    completions: list[str]
    rows: list[dict[str, Any]]
    verdicts: list[Verdict]
    verifier: Verifier


Reward = Callable[[RewardBatch], list[float]]
REWARDS: dict[str, Reward] = {}


def register_reward(name: str) -> Callable[[Reward], Reward]:
    """A decorator that registers a reward under `name`, the value `train.reward` takes to train with it."""
    def register(reward: Reward) -> Reward:
        REWARDS[name] = reward
        return reward

    return register


def get_reward(name: str, config_file: Path | str) -> Reward:
    if name not in REWARDS:
        raise UserError(f"{config_file}: field 'train.reward' is '{name}', which no reward is registered as; use one "
                        f"of: {', '.join(sorted(REWARDS))} (sws.training.rewards.register_reward adds one)")
    return REWARDS[name]


@register_reward("correct")
def correct(batch: RewardBatch) -> list[float]:
    """1.0 when the world's verifier finds the completion's final answer equivalent to the reference, else 0.0
    (also when its grading ran out of time: GRPO needs a number, though the rollout log leaves it out)."""
    return [1.0 if verdict is True else 0.0 for verdict in batch.verdicts]
