"""The synthesizer's reward: −0.5 for an invalid card, else G(quality)·G(reliability)·T(sr)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal

INVALID_REWARD = -0.5

TeachabilityCurve = Literal["synco", "azr", "rzero"]


def gate(value: float) -> float:
    """G(v) = clip((v − 0.5)/0.5, 0, 1): nothing below one half, linear to 1 above."""
    return min(1.0, max(0.0, (value - 0.5) / 0.5))


def teachability_synco(sr: float) -> float:
    """The paper's tent: 2·sr up to 0.5, then max(0, 1 − 2(sr − 0.5))."""
    return 2 * sr if sr <= 0.5 else max(0.0, 1 - 2 * (sr - 0.5))


def teachability_azr(sr: float) -> float:
    """Absolute Zero's learnability: 1 − sr for a task solved at least once, 0 for one never solved."""
    return 1 - sr if sr > 0 else 0.0


TEACHABILITY: dict[str, Callable[[float], float]] = {
    "synco": teachability_synco, "azr": teachability_azr,
    # R-Zero's uncertainty reward 1 − 2|sr − 0.5| is the paper's tent on [0, 1]; the name is kept for configs.
    "rzero": teachability_synco,
}


def synthesizer_reward(valid: bool, quality: float, reliability: float, sr: float,
                       curve: TeachabilityCurve = "synco") -> float:
    if not valid:
        return INVALID_REWARD
    return gate(quality) * gate(reliability) * TEACHABILITY[curve](sr)
