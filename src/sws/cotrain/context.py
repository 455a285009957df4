"""The context c_t, rebuilt every step from the run's own state, and its hash.

It carries the reasoner's measured per-category accuracy and slope (from the step's rollouts), the concepts of
problems the reasoner has never solved, a pool report and the top reject reason codes. Nothing is guessed and
nothing persists outside the ledger, so the frozen arm sees the same live context as the co-trained one.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field

SLOPE_WINDOW = 5  # steps over which the accuracy slope is fitted
TOP_REASONS = 3
TOP_CONCEPTS = 3
UNLISTED = "(unlisted)"  # the ledger's name for valid tasks of no run category: counted, never in the context


@dataclass
class Ledger:
    """What the loop has measured so far; `record_*` are called by the loop, `context` reads it."""
    accuracy_history: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    unsolved_concepts: Counter = field(default_factory=Counter)
    accepted_per_category: Counter = field(default_factory=Counter)
    reject_reasons: Counter = field(default_factory=Counter)
    generated: int = 0
    valid: int = 0
    duplicates: int = 0

    def record_step(self, accuracy_by_category: dict[str, float], unsolved_concepts: list[str],
                    accepted_categories: list[str], reject_reasons: list[str], generated: int) -> None:
        for category, accuracy in accuracy_by_category.items():
            self.accuracy_history[category].append(accuracy)
        self.unsolved_concepts.update(unsolved_concepts)
        self.accepted_per_category.update(accepted_categories)
        self.reject_reasons.update(reject_reasons)
        self.generated += generated
        self.valid += len(accepted_categories)
        self.duplicates += sum(reason == "duplicate" for reason in reject_reasons)

    def to_json(self) -> dict:
        return {"accuracy_history": dict(self.accuracy_history), "unsolved_concepts": dict(self.unsolved_concepts),
                "accepted_per_category": dict(self.accepted_per_category),
                "reject_reasons": dict(self.reject_reasons), "generated": self.generated, "valid": self.valid,
                "duplicates": self.duplicates}

    @classmethod
    def from_json(cls, data: dict) -> Ledger:
        ledger = cls(unsolved_concepts=Counter(data["unsolved_concepts"]),
                     accepted_per_category=Counter(data["accepted_per_category"]),
                     reject_reasons=Counter(data["reject_reasons"]), generated=data["generated"],
                     valid=data["valid"], duplicates=data["duplicates"])
        ledger.accuracy_history.update({k: list(v) for k, v in data["accuracy_history"].items()})
        return ledger


@dataclass(frozen=True)
class Context:
    accuracy: dict[str, float]
    slope: dict[str, float]
    unsolved_concepts: list[str]
    accepted_per_category: dict[str, int]
    valid_rate: float
    duplicate_rate: float
    top_reject_reasons: list[tuple[str, int]]

    def digest(self) -> str:
        canonical = json.dumps(self.__dict__, sort_keys=True, default=list)
        return hashlib.sha256(canonical.encode()).hexdigest()[:16]

    def render(self) -> str:
        """The compressed capability report the synthesizer reads: weakest categories first. Built by joining
        strings, never `str.format` over problem text, so braces in any field survive."""
        weakest = sorted(self.accuracy, key=lambda category: (self.accuracy[category], category))
        parts = ["weak: " + " ".join(f"{c}={self.accuracy[c]:.1f}" for c in weakest[:2])]
        if self.unsolved_concepts:
            parts.append("fail: " + ", ".join(self.unsolved_concepts))
        if self.top_reject_reasons:
            parts.append("rej: " + " ".join(reason for reason, _ in self.top_reject_reasons))
        return "\n".join(parts) + "\n"


def _slope(values: list[float]) -> float:
    window = values[-SLOPE_WINDOW:]
    n = len(window)
    if n < 2:
        return 0.0
    mean_x, mean_y = (n - 1) / 2, sum(window) / n
    numerator = sum((x - mean_x) * (y - mean_y) for x, y in enumerate(window))
    return numerator / sum((x - mean_x) ** 2 for x in range(n))


def build_context(ledger: Ledger, categories: list[str]) -> Context:
    history = ledger.accuracy_history
    return Context(
        accuracy={c: round(history[c][-1], 4) if history.get(c) else 0.0 for c in categories},
        slope={c: round(_slope(history.get(c, [])), 4) for c in categories},
        unsolved_concepts=[concept for concept, _ in ledger.unsolved_concepts.most_common(TOP_CONCEPTS)],
        accepted_per_category={c: ledger.accepted_per_category[c] for c in categories},
        valid_rate=round(ledger.valid / ledger.generated, 4) if ledger.generated else 0.0,
        duplicate_rate=round(ledger.duplicates / ledger.generated, 4) if ledger.generated else 0.0,
        top_reject_reasons=ledger.reject_reasons.most_common(TOP_REASONS),
    )
