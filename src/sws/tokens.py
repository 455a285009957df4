"""Tokens a stage's model calls cost, per role, and what they cost in money.

The executor records every completion a step gets (`record`, from the request cache and the shards too: the
counts are what the step's completions cost when they were generated, so a resumed run reports the same
totals as one that ran straight through); `run_stage` opens a `ledger` around each stage's body and writes its
counts into the stage's manifest as `tokens: {role: {prompt, completion, completions}}`. Prompt tokens are those
each model call billed (`Completion.prompt_tokens`). `cost` prices them with the pipeline's `pricing`
(dollars per million input and output tokens, per role).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # engines import config, which imports artifacts, which imports this module
    from sws.engines.base import Completion

TokenCounts = dict[str, dict[str, int]]
_ledgers: list[TokenCounts] = []


@contextmanager
def ledger() -> Iterator[TokenCounts]:
    """Counts per role of what `record` sees inside this block (the innermost block gets them)."""
    counts: TokenCounts = {}
    _ledgers.append(counts)
    try:
        yield counts
    finally:
        _ledgers.pop()


def record(role: str, completions: Iterable[list[Completion]]) -> None:
    if not _ledgers:
        return
    counts = _ledgers[-1].setdefault(role, {"prompt": 0, "completion": 0, "completions": 0})
    for samples in completions:
        for completion in samples:
            counts["prompt"] += completion.prompt_tokens
            counts["completion"] += completion.tokens
            counts["completions"] += 1


def add(total: TokenCounts, more: TokenCounts) -> TokenCounts:
    """The per-role sum of two counts."""
    summed = {role: dict(counts) for role, counts in total.items()}
    for role, counts in more.items():
        into = summed.setdefault(role, {"prompt": 0, "completion": 0, "completions": 0})
        for name, value in counts.items():
            into[name] = into.get(name, 0) + int(value)
    return summed


def role_price(pricing: dict[str, Any], role: str) -> Any | None:
    """The price of a role (`judges` prices every judge); None when the pipeline gives none."""
    return pricing.get(role.split(".")[0])


def cost(counts: TokenCounts, pricing: dict[str, Any]) -> float | None:
    """Dollars for these counts at `pricing` (role -> price with `input` and `output` per million tokens);
    None when no role that used tokens has a price."""
    priced = [(counts[role], price) for role in counts if (price := role_price(pricing, role)) is not None]
    if not priced:
        return None
    return sum(used["prompt"] * price.input / 1e6 + used["completion"] * price.output / 1e6 for used, price in priced)
