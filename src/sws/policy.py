"""How a problem is put to the policy being trained: one rule shared by training, filtering, labeling and eval."""

from __future__ import annotations

from typing import Any

MATH_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


def policy_prompt(problem: str, world: str) -> dict[str, Any]:
    """Request fields for asking the policy `problem`.

    The arith world's tiny policy reads raw text and answers `\\boxed{...}`; chat models get the problem with the
    usual boxed-answer instruction as one user message.
    """
    if world == "arith":
        return {"prompt": f"{problem}\n"}
    return {"messages": ({"role": "user", "content": f"{problem}\n\n{MATH_INSTRUCTION}"},)}
