"""Verification of a batch of task cards.

Each card goes through: parse; generate's pre-filters; exact and near dedup against recently accepted tasks
and the cards already kept in this batch; decontamination against benchmark texts and names (names on word
boundaries: "claimed" does not contain the benchmark "aime"); then the label. A world that computes its own
(`World.truth`: arith) labels each card as it comes, its reliability the synthesizer's agreement with the truth.
Otherwise a labeler's consistent samples label the cards that passed the checks, all in one batch
(`sws.cotrain.labeler`), the reliability being the label's consistency; a card rejected there has already
claimed its place against a later near-duplicate of the same batch. Its category is the card's, read as the
categorize step reads a domain (case, spacing, "and" or "&", a listed name's shortening); a category that names
none of the run's leaves the task valid and uncategorised (None), so free text never becomes a category of the
context. A card whose problem line carries a worked solution is rejected (`solution_leak`), not cut: the
synthesizer is to learn not to write one. Either way the synthesizer's own answer is
audited against the label (`synth_agrees`) and is never the label.

A card may carry a worked solution on its `solution` line(s); with `require_solution` one without is rejected
(`no_solution`). A card's solution makes its reliability SynCo's: 1 when the solution's final answer (read by
the world's verifier) agrees with the label, else 0. No judge rates co-training cards, so a card's quality is
1 whenever it passes the checks; the pool records why (`quality_reason`, `no_judge`).
"""

from __future__ import annotations

import functools
import re
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sws.categorize import listed_domain
from sws.cotrain.cards import CardError, TaskCard, parse_card
from sws.cotrain.labeler import ConsistencyLabeler
from sws.near_duplicates import NearDuplicateIndex
from sws.problem_filters import prefilter_reason
from sws.verifier import Verifier
from sws.world import Truth

BENCHMARK_NAMES = ("aime", "amc", "gsm8k", "math500", "olympiadbench", "minerva", "gpqa")
NEAR_DUPLICATE_THRESHOLD = 0.9
NEAR_DUPLICATE_MIN_CHARS = 40
MIN_CHARS = 8
MAX_TOKENS = 200
NO_JUDGE = "no_judge"  # why a card's quality is 1: co-training calls no judge role to rate it


@dataclass(frozen=True)
class Verdict:
    problem: str
    answer: str | None  # the label: the world's truth or the labeler's consistent answer
    synth_answer: str | None
    category: str | None
    concepts: tuple[str, ...]
    reject_reason: str | None
    quality: float
    reliability: float
    synth_agrees: bool | None = None  # the audit of the synthesizer's answer (None: it gave none)
    solution: str | None = None
    solution_answer: str | None = None  # the solution's final answer, as the world's verifier reads it

    @property
    def valid(self) -> bool:
        return self.reject_reason is None

    @property
    def quality_reason(self) -> str | None:
        return NO_JUDGE if self.quality == 1.0 else None


class CardVerifier:
    """Keeps the recently accepted tasks (a bounded window) for dedup across steps."""

    def __init__(self, labels: Callable[[str], Truth] | ConsistencyLabeler, benchmark_texts: Sequence[str],
                 categories: Sequence[str], verifier: Verifier, recent_window: int = 2000,
                 require_solution: bool = False) -> None:
        """`categories`: the run's, which a labeled card's category must name (a world's truth names its own);
        `verifier`: the world's, which reads a solution's final answer."""
        self._labels = labels
        self._categories = list(categories)
        self._verifier = verifier
        self._require_solution = require_solution
        self._benchmarks = NearDuplicateIndex(NEAR_DUPLICATE_THRESHOLD, NEAR_DUPLICATE_MIN_CHARS)
        for text in benchmark_texts:
            self._benchmarks.add(text, "benchmark")
        self._recent: deque[str] = deque(maxlen=recent_window)
        self._benchmark_name = re.compile(r"\b(?:" + "|".join(BENCHMARK_NAMES) + r")\b", re.IGNORECASE)

    def verify_batch(self, texts: Sequence[str]) -> list[Verdict]:
        accepted = NearDuplicateIndex(NEAR_DUPLICATE_THRESHOLD, NEAR_DUPLICATE_MIN_CHARS)
        for problem in self._recent:
            accepted.add(problem, "recent")
        if isinstance(self._labels, ConsistencyLabeler):
            screened = []
            for text in texts:
                screened.append(card := self._screen(text, accepted))
                if isinstance(card, TaskCard):
                    accepted.add(card.problem, "batch")
            verdicts = self._labeled(self._labels, screened)
        else:
            verdicts = [self._by_truth(self._labels, text, accepted) for text in texts]
        self._recent.extend(v.problem for v in verdicts if v.valid)
        return verdicts

    def recent(self) -> list[str]:
        return list(self._recent)

    def restore(self, recent: Sequence[str]) -> None:
        self._recent.clear()
        self._recent.extend(recent)

    def is_contaminated(self, problem: str) -> bool:
        """Whether the problem names a benchmark or repeats a benchmark text (a validation task)."""
        return bool(self._benchmark_name.search(problem) or self._benchmarks.find(problem))

    def _screen(self, text: str, accepted: NearDuplicateIndex) -> Verdict | TaskCard:
        """The card, once past every check but the label; else its rejection."""
        try:
            card = parse_card(text)
        except CardError as error:
            return Verdict(text.strip(), None, None, None, (), str(error), 0.0, 0.0)
        if self._require_solution and card.solution is None:
            return _rejected(card, "no_solution")
        if reason := prefilter_reason(card.problem, MIN_CHARS, MAX_TOKENS):
            return _rejected(card, reason)
        if self.is_contaminated(card.problem):
            return _rejected(card, "contaminated")
        if accepted.find(card.problem):
            return _rejected(card, "duplicate", quality=1.0)
        return card

    def _by_truth(self, truth_of: Callable[[str], Truth], text: str, accepted: NearDuplicateIndex) -> Verdict:
        card = self._screen(text, accepted)
        if isinstance(card, Verdict):
            return card
        truth = truth_of(card.problem)
        if truth.reject_reason is not None:
            return _rejected(card, truth.reject_reason)
        accepted.add(card.problem, "batch")
        agrees = None if card.answer is None else card.answer.strip() == truth.answer
        spelling = self._verifier.spelling
        solution_answer = self._solution_answer(card)
        reliability = _reliability(card, solution_answer, lambda answer: spelling(answer) == spelling(truth.answer),
                                   1.0 if agrees else 0.0)
        return Verdict(card.problem, truth.answer, card.answer, truth.category, truth.concepts, None,
                       1.0, reliability, agrees, card.solution, solution_answer)

    def _labeled(self, labeler: ConsistencyLabeler, screened: list[Verdict | TaskCard]) -> list[Verdict]:
        cards = [card for card in screened if isinstance(card, TaskCard)]
        labels = iter(labeler.label([card.problem for card in cards]))
        verdicts = []
        for card in screened:
            if isinstance(card, Verdict):
                verdicts.append(card)
                continue
            label = next(labels)
            if label.reject_reason is not None:
                verdicts.append(_rejected(card, label.reject_reason))
                continue
            agrees = None if card.answer is None else labeler.agrees(label.answer, card.answer)
            category = listed_domain(card.category, self._categories) if card.category else None
            solution_answer = self._solution_answer(card)
            reliability = _reliability(card, solution_answer, functools.partial(labeler.agrees, label.answer),
                                       label.consistency)
            verdicts.append(Verdict(card.problem, label.answer, card.answer, category, (), None, 1.0,
                                    reliability, agrees, card.solution, solution_answer))
        return verdicts

    def _solution_answer(self, card: TaskCard) -> str | None:
        return self._verifier.extract(card.solution) if card.solution is not None else None


def _reliability(card: TaskCard, solution_answer: str | None, states_label: Callable[[str], bool],
                 without_solution: float) -> float:
    """SynCo's for a card with a solution: 1 when its final answer agrees with the label, else 0 (no final answer
    included); `without_solution` for a card without one."""
    if card.solution is None:
        return without_solution
    return 1.0 if solution_answer is not None and states_label(solution_answer) else 0.0


def _rejected(card: TaskCard, reason: str, quality: float = 0.0) -> Verdict:
    return Verdict(card.problem, None, card.answer, None, (), reason, quality, 0.0, solution=card.solution)
