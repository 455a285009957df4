"""Tokens a stage's model calls cost, per role, and what they cost in money.

The executor records every completion a step gets (`record`, from the request cache and the shards too: the
counts are what the step's completions cost when they were generated, so a resumed run reports the same
totals as one that ran straight through); `run_stage` opens a `ledger` around each stage's body and writes its
counts into the stage's manifest as `tokens: {role: {prompt, completion, completions}}`. Prompt tokens are those
each model call billed (`Completion.prompt_tokens`). `cost` prices them with the pipeline's `pricing`
(dollars per million input and output tokens, per role).

A `Cap` (`synthesize.max_tokens`, `synthesize.max_cost`) counts what `record` sees inside `capped()`, plus the
counts of steps skipped as done (`record_done`); the executor asks `check_cap` between shards, which raises
`CapReached` once the counts, with the shards done since, reach it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
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
    samples = [completion for answers in completions for completion in answers]
    record_counts({role: {"prompt": sum(c.prompt_tokens for c in samples), "completion": sum(c.tokens for c in samples),
                          "completions": len(samples)}})


def record_counts(counts: TokenCounts) -> None:
    """Counts of completions a step got (into the innermost ledger and every active cap)."""
    if _ledgers:
        _ledgers[-1].update(add(_ledgers[-1], counts))
    record_done(counts)


def record_done(counts: TokenCounts) -> None:
    """Counts of a step done before (skipped now): they count towards an active cap, not into a ledger."""
    for cap in _caps:
        cap.spent = add(cap.spent, counts)


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


def total_tokens(counts: TokenCounts) -> int:
    return sum(used["prompt"] + used["completion"] for used in counts.values())


@dataclass
class Cap:
    """`max_tokens` (prompt + completion) or `max_cost` (dollars at `pricing`) for what the block spends."""

    max_tokens: int | None
    max_cost: float | None
    pricing: dict[str, Any]
    spent: TokenCounts = field(default_factory=dict)

    def reached_by(self, counts: TokenCounts) -> str | None:
        """The cap's setting when `counts` reach it, else None."""
        if self.max_tokens is not None and total_tokens(counts) >= self.max_tokens:
            return f"synthesize.max_tokens = {self.max_tokens:,}"
        if self.max_cost is not None and (cost(counts, self.pricing) or 0.0) >= self.max_cost:
            return f"synthesize.max_cost = ${self.max_cost:g}"
        return None


class CapReached(Exception):
    """A spending cap was reached between shards: what was asked is written, the step is partial."""

    def __init__(self, setting: str, spent: TokenCounts, pricing: dict[str, Any]) -> None:
        self.setting = setting
        self.spent = spent
        priced = cost(spent, pricing)
        money = f" (${priced:.4g})" if priced is not None else ""
        super().__init__(f"reached {setting} after {total_tokens(spent):,} tokens{money}")


_caps: list[Cap] = []


@contextmanager
def capped(cap: Cap | None) -> Iterator[Cap | None]:
    """Within this block, `check_cap` stops at `cap` (None: no cap)."""
    if cap is None:
        yield None
        return
    _caps.append(cap)
    try:
        yield cap
    finally:
        _caps.remove(cap)


def capping() -> bool:
    return bool(_caps)


def check_cap(since: TokenCounts) -> None:
    """CapReached when what the active caps counted, with `since` (shards done but not yet recorded), reaches
    one; then `since` is recorded first, so the step's partial manifest and the message include it."""
    for cap in _caps:
        setting = cap.reached_by(add(cap.spent, since))
        if setting is not None:
            record_counts(since)
            raise CapReached(setting, cap.spent, cap.pricing)
