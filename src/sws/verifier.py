"""What a world's verifier is: how a model output states its final answer, and when two answers are the same.

A world sets `World.verifier` to an instance of a `Verifier` subclass; label, audit, the band filter, eval and
both training rewards grade through it, in `sws.grading`'s deadline-bounded worker processes. Those processes
and verl's reward module receive the verifier by reference, so its class is a module-level class, and verl's
reward module rebuilds it as `Class()`: a verifier takes no arguments to build.

This module imports nothing beyond the standard library: verl's reward module runs where sws's dependencies
are not installed.
"""

from __future__ import annotations

import re

_DOLLAR_DELIMITED = re.compile(r"\$+(?P<inner>.*?)(?<!\\)\$+", re.DOTALL)


def without_dollar_delimiters(text: str) -> str:
    """`text` without one pair of surrounding `$…$` (or `$$…$$`) delimiters, if it has them."""
    delimited = _DOLLAR_DELIMITED.fullmatch(text)
    return delimited.group("inner") if delimited else text


def normalize_answer(answer: str) -> str:
    """An answer's spelling without whitespace and without surrounding `$…$`: answers often come wrapped."""
    return without_dollar_delimiters(re.sub(r"\s+", "", answer))


class Verifier:
    """Answer extraction and equivalence; the hooks below `equivalent` have defaults a verifier may keep."""

    def extract(self, text: str) -> str | None:
        """The final answer a model output states, or None when it states none."""
        raise NotImplementedError

    def equivalent(self, reference: str, answer: str) -> bool:
        """Whether `answer` states the same as `reference`. It runs in a grading worker process (see
        `in_worker`), so it may be slow: the pool leaves a comparison past its deadline ungraded."""
        raise NotImplementedError

    def spelling(self, answer: str) -> str:
        """An answer's canonical spelling, compared in the calling process: answers of the same spelling are
        equivalent without asking `equivalent`, a blank spelling is no answer, and majority voting groups
        answers by spelling before comparing the groups."""
        return normalize_answer(answer)

    def quick_verdict(self, reference: str, answer: str) -> bool | None:
        """A verdict cheap enough to reach in the calling process, without a worker; None: ask `equivalent`."""
        return None

    def in_worker(self, deadline_s: float) -> Verifier:
        """The verifier a grading worker process uses, set up there once before its first comparison (imports,
        warm-up), so that deadlines measure grading only; `deadline_s` is how long the pool lets each
        comparison run, for a verifier whose own timeouts should end first."""
        return self
