"""Verification of a batch of task cards.

Each card goes through: parse; generate's pre-filters; exact and near dedup against recently accepted tasks
and the cards already kept in this batch; decontamination against benchmark texts and names (names on word
boundaries: "claimed" does not contain the benchmark "aime"); the label from the world's truth
(`World.truth`). The synthesizer's own answer is audited against that label (reliability) and is never the label.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sws.cotrain.cards import CardError, parse_card
from sws.near_duplicates import NearDuplicateIndex
from sws.problem_filters import prefilter_reason
from sws.world import Truth

BENCHMARK_NAMES = ("aime", "amc", "gsm8k", "math500", "olympiadbench", "minerva", "gpqa")
NEAR_DUPLICATE_THRESHOLD = 0.9
NEAR_DUPLICATE_MIN_CHARS = 40
MIN_CHARS = 8
MAX_TOKENS = 200


@dataclass(frozen=True)
class Verdict:
    problem: str
    answer: str | None  # the label, from the world's truth
    synth_answer: str | None
    category: str | None
    concepts: tuple[str, ...]
    reject_reason: str | None
    quality: float
    reliability: float

    @property
    def valid(self) -> bool:
        return self.reject_reason is None


class CardVerifier:
    """Keeps the recently accepted tasks (a bounded window) for dedup across steps."""

    def __init__(self, truth: Callable[[str], Truth], benchmark_texts: Sequence[str],
                 recent_window: int = 2000) -> None:
        self._truth = truth
        self._benchmarks = NearDuplicateIndex(NEAR_DUPLICATE_THRESHOLD, NEAR_DUPLICATE_MIN_CHARS)
        for text in benchmark_texts:
            self._benchmarks.add(text, "benchmark")
        self._recent: deque[str] = deque(maxlen=recent_window)
        self._benchmark_name = re.compile(r"\b(?:" + "|".join(BENCHMARK_NAMES) + r")\b", re.IGNORECASE)

    def verify_batch(self, texts: Sequence[str]) -> list[Verdict]:
        accepted = NearDuplicateIndex(NEAR_DUPLICATE_THRESHOLD, NEAR_DUPLICATE_MIN_CHARS)
        for problem in self._recent:
            accepted.add(problem, "recent")
        verdicts = []
        for text in texts:
            verdict = self._verify(text, accepted)
            if verdict.valid:
                accepted.add(verdict.problem, "batch")
            verdicts.append(verdict)
        self._recent.extend(v.problem for v in verdicts if v.valid)
        return verdicts

    def recent(self) -> list[str]:
        return list(self._recent)

    def restore(self, recent: Sequence[str]) -> None:
        self._recent.clear()
        self._recent.extend(recent)

    def _verify(self, text: str, accepted: NearDuplicateIndex) -> Verdict:
        try:
            card = parse_card(text)
        except CardError as error:
            return Verdict(text.strip(), None, None, None, (), str(error), 0.0, 0.0)

        def reject(reason: str, quality: float = 0.0) -> Verdict:
            return Verdict(card.problem, None, card.answer, None, (), reason, quality, 0.0)

        if reason := prefilter_reason(card.problem, MIN_CHARS, MAX_TOKENS):
            return reject(reason)
        if self._benchmark_name.search(card.problem) or self._benchmarks.find(card.problem):
            return reject("contaminated")
        if accepted.find(card.problem):
            return reject("duplicate", quality=1.0)
        truth = self._truth(card.problem)
        if truth.reject_reason is not None:
            return reject(truth.reject_reason)
        reliability = 1.0 if card.answer is not None and card.answer.strip() == truth.answer else 0.0
        return Verdict(card.problem, truth.answer, card.answer, truth.category, truth.concepts, None,
                       1.0, reliability)
