"""sws's reward for verl: `VerlReward`, called as `compute_score(data_source, solution_str, ground_truth,
extra_info=None, **kwargs)`.

verl loads `compute_score` from `reward.custom_reward_function.path`: the `reward.py` that `sws train` writes
puts sws's source on `sys.path` and builds a `VerlReward` naming the world's verifier class and the run's
registered reward (`train.reward`), both imported by name here. verl calls it once per response from a thread
pool. Grading goes through `sws.grading`, whose spawned worker processes give every comparison a hard deadline
(math-verify's own timeouts use signals, which fail outside a main thread). The returned `problem_id` lands in
verl's rollout dumps (with `trainer.use_v1=False`), so `sws train` and `sws ingest` know which problem each
response answers; `acc` is the verifier's verdict (verl's group filter reads it), and `graded` is false for a
response whose grading ran out of time, which the rollouts read from the dumps leave out of its group's `n` (it
is not a wrong sample); `score` is the reward's.

Only the standard library is imported (and what the verifier needs, math-verify for math): verl's environment
has none of sws's other dependencies.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from sws.grading import grade_completions, shared_pool
from sws.references import load
from sws.training.rewards import RewardBatch
from sws.verifier import Verifier


@dataclass(frozen=True)
class VerlReward:
    """verl's `compute_score` for a run: `verifier` names the world's verifier class (`module:Class`, built as
    `Class()`), `reward` the registered reward function (`module:function`)."""

    verifier: str
    reward: str

    def __call__(self, data_source: str, solution_str: str, ground_truth: str,
                 extra_info: dict[str, Any] | None = None, **_: Any) -> dict[str, Any]:
        verifier = _built(self.verifier)
        [verdict] = grade_completions([str(ground_truth)], [solution_str], shared_pool(verifier))
        row = {**(extra_info or {}), "data_source": data_source, "answer": str(ground_truth)}
        [score] = load(self.reward)(RewardBatch([solution_str], [row], [verdict], verifier))
        return {
            "score": float(score),
            "acc": verdict is True,
            "graded": verdict is not None,
            "problem_id": str((extra_info or {}).get("problem_id", "")),
        }


@functools.cache
def _built(verifier_class: str) -> Verifier:
    """One instance per verifier class, so that every call grades on the same shared pool."""
    return load(verifier_class)()
