"""sws's reward for verl: `compute_score(data_source, solution_str, ground_truth, extra_info=None, **kwargs)`.

verl loads it from `reward.custom_reward_function.path` (the `reward.py` that `sws train` writes puts sws's
source on `sys.path` and re-exports this function) and calls it once per response from a thread pool. Grading
goes through `sws.grading`, whose spawned worker processes give every comparison a hard deadline: math-verify's
own timeouts use signals, which fail outside a main thread. The returned `problem_id` lands in verl's rollout
dumps (with `trainer.use_v1=False`), so `sws train` and `sws ingest` know which problem each response answers;
`graded` is false for a response whose grading ran out of time, which scores 0 but which the rollouts read
from the dumps leave out of its group's `n` (it is not a wrong sample).

Only the standard library and math-verify are imported: verl's environment has none of sws's other dependencies.
"""

from __future__ import annotations

from typing import Any

from sws.grading import extract_answer, grade_many


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None,
    **_: Any,
) -> dict[str, Any]:
    verdict = grade_many([(str(ground_truth), extract_answer(solution_str))])[0]
    return {
        "score": 1.0 if verdict is True else 0.0,
        "acc": verdict is True,
        "graded": verdict is not None,
        "problem_id": str((extra_info or {}).get("problem_id", "")),
    }
