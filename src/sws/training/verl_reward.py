"""sws's reward for verl: point `custom_reward_function.path` at this file and `.name` at `compute_score`.

verl calls it once per response; the returned dict's extra keys land in verl's rollout dumps, so `problem_id`
lets `sws identify` read those dumps as rollout records.
"""

from __future__ import annotations

from typing import Any

from sws.training.reward import grade_completions


def compute_score(
    data_source: str, solution_str: str, ground_truth: str, extra_info: dict[str, Any] | None = None
) -> dict[str, Any]:
    correct = grade_completions([str(ground_truth)], [solution_str])[0]
    return {
        "score": float(correct),
        "acc": correct,
        "problem_id": str((extra_info or {}).get("problem_id", "")),
    }
