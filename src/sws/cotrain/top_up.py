"""The reasoner's tasks of a step beyond the step's valid cards, so that every arm trains the reasoner on the
same number of tasks, and so rollouts, per step whatever its synthesizer's acceptance: tasks the arm accepted in
earlier steps first, then seed problems, each drawn at random without repeats. A seed problem that repeats a
validation task is never drawn, as a card repeating one is never accepted."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

Task = tuple[str, str]  # (problem, label)


@dataclass(frozen=True)
class TopUp:
    accepted: Sequence[Task]  # the arm's valid cards of earlier steps
    seed_set: Sequence[Task]

    @classmethod
    def of(cls, pool_rows: Sequence[dict], seed_set: Sequence[Task],
           contaminated: Callable[[str], bool]) -> TopUp:
        """From the arm's pool rows so far and the seed set, less its problems `contaminated` flags."""
        return cls([(row["problem"], row["answer"]) for row in pool_rows if row["valid"]],
                   [task for task in seed_set if not contaminated(task[0])])

    def draw(self, n: int, rng: random.Random) -> tuple[list[Task], list[Task]]:
        """Up to `n` tasks: (earlier accepted ones, seed problems); fewer only when both run short."""
        replayed = rng.sample(self.accepted, min(n, len(self.accepted))) if n > 0 else []
        missing = n - len(replayed)
        return replayed, rng.sample(self.seed_set, min(missing, len(self.seed_set))) if missing > 0 else []
