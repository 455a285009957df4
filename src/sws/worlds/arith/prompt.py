"""How the tiny policy is asked a problem: the raw text and a newline; it answers `\\boxed{...}`."""

from __future__ import annotations


def policy_prompt(problem: str) -> dict[str, str]:
    return {"prompt": f"{problem}\n"}
