"""Near-duplicate detection for problem texts (within a batch, against the seed set and benchmark files).

The rule, chosen so that short arithmetic problems that differ in one number stay distinct:
- two problems are duplicates when their normalised texts are equal (case, spacing, spaces around symbols,
  closing punctuation and the order of commuted operands, `8+47` / `47+8`, ignored), whatever their length;
- two longer problems (both normalised texts at least `min_chars` long) are near-duplicates when they state the
  same numbers (as a multiset) and the Jaccard similarity of their character 4-gram sets is at least
  `threshold`. Problems that state different numbers are different problems: "Compute 47+85." and
  "Compute 47+86." are both kept, and so is a long word problem with one quantity changed.
Candidates are bucketed by their numbers, so a lookup compares against the few texts sharing them.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass

from sws.commuted import commuted_key

SHINGLE_SIZE = 4
_SPACE = re.compile(r"\s+")
_SPACE_AROUND_SYMBOL = re.compile(r"\s*([^\w\s])\s*")
_NUMBER = re.compile(r"\d+(?:\.\d+)?")


def problem_key(text: str) -> str:
    """What two spellings of one problem share: the one rule for duplicates in prepare, generate and mix.
    Commuted operands (`8+47`, `47+8`) are one spelling (`sws.commuted`)."""
    text = commuted_key(_SPACE.sub(" ", text.casefold()).strip())
    text = _SPACE_AROUND_SYMBOL.sub(r"\1", text)
    return text.rstrip(".?!$ ").strip()


def shingles(normalized: str, size: int = SHINGLE_SIZE) -> frozenset[str]:
    if len(normalized) <= size:
        return frozenset({normalized})
    return frozenset(normalized[i:i + size] for i in range(len(normalized) - size + 1))


def jaccard(left: frozenset[str], right: frozenset[str]) -> float:
    if not left and not right:
        return 1.0
    return len(left & right) / len(left | right)


def numbers_key(normalized: str) -> tuple[str, ...]:
    return tuple(sorted(_NUMBER.findall(normalized)))


@dataclass
class _Entry:
    shingles: frozenset[str]
    source: str


class NearDuplicateIndex:
    """Texts seen so far; `find` names the source of the first one a new text duplicates."""

    def __init__(self, threshold: float, min_chars: int) -> None:
        self.threshold = threshold
        self.min_chars = min_chars
        self._exact: dict[str, str] = {}
        self._by_numbers: dict[tuple[str, ...], list[_Entry]] = defaultdict(list)

    def __len__(self) -> int:
        return len(self._exact)

    def add(self, text: str, source: str) -> None:
        normalized = problem_key(text)
        self._exact.setdefault(normalized, source)
        if len(normalized) >= self.min_chars:
            self._by_numbers[numbers_key(normalized)].append(_Entry(shingles(normalized), source))

    def find(self, text: str) -> str | None:
        normalized = problem_key(text)
        if normalized in self._exact:
            return self._exact[normalized]
        if len(normalized) < self.min_chars:
            return None
        grams = shingles(normalized)
        for entry in self._by_numbers.get(numbers_key(normalized), ()):
            if jaccard(grams, entry.shingles) >= self.threshold:
                return entry.source
        return None
