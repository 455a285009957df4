"""The static arm's task source: the seed problems as task cards, B per step in a fixed shuffled order.

It stands where the synthesizer stands in the loop, so the static arm runs the same step (verify, K rollouts per
task, the reasoner's update) on the seed set; it is never trained, and its place in the order is saved for resume.
"""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

from sws.cotrain.cards import TaskCard, render_card
from sws.cotrain.learner import Completion, SamplingSettings, ScoredCompletion

POSITION_FILE = "position.json"


class SeedCards:
    def __init__(self, problems: Sequence[tuple[str, str]], seed: int) -> None:
        """`problems`: (problem, answer) pairs of the seed set."""
        if not problems:
            raise ValueError("the static arm needs seed problems")
        cards = [render_card(TaskCard(problem=problem, answer=answer)) for problem, answer in problems]
        random.Random(seed).shuffle(cards)
        self._cards = cards
        self.drawn = 0

    def sample(self, prompts: Sequence[str], n: int, settings: SamplingSettings) -> list[list[Completion]]:
        batches = []
        for prompt in prompts:
            batches.append([Completion(prompt, self._cards[(self.drawn + i) % len(self._cards)]) for i in range(n)])
            self.drawn += n
        return batches

    def forward_backward(self, batch: Sequence[ScoredCompletion], settings: SamplingSettings) -> float:
        raise TypeError("the seed set is not trained: run the static arm with update_synthesizer off")

    def optim_step(self) -> None:
        raise TypeError("the seed set is not trained: run the static arm with update_synthesizer off")

    def sync_weights(self) -> None:
        return None

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / POSITION_FILE).write_text(json.dumps({"drawn": self.drawn}))

    def load(self, folder: Path) -> None:
        self.drawn = json.loads((folder / POSITION_FILE).read_text())["drawn"]

    def close(self, succeeded: bool) -> None:
        return None
