"""The arith world's tiny synthesizer: the policy's character-level Qwen2 with room for a capability report.

It is warm-started by a short supervised run on the world's own problems: each example shows a compressed
capability report (the co-training context of a made-up reasoner) and a task card for a problem of one of the
report's two weakest categories, with its true answer. It learns the card format and the report → category link;
GRPO in co-training then does the rest. Cached like the policy, keyed by its settings.
"""

from __future__ import annotations

import random
from pathlib import Path

from sws.cotrain.cards import TaskCard, render_card
from sws.cotrain.context import Ledger, build_context
from sws.worlds.arith.bootstrap import (
    LEVEL_START,
    built_folder,
    cached_build,
    cached_folder,
    settings_hash,
    supervised_run,
)
from sws.worlds.arith.families import CATEGORIES, families_of, sample_problem
from sws.worlds.arith.policy import architecture, build_policy

RECIPE_VERSION = 1
MAX_POSITIONS = 256  # a report of up to ~180 characters and a card of up to ~60
MAX_CARD_TOKENS = 64
REJECT_REASONS = ("duplicate", "too_short", "ill_posed", "answer_leak", "no_problem")


def report_and_card(rng: random.Random, _progress: float = 1.0) -> tuple[str, str]:
    """One (context report, task card) pair for the warm start."""
    accuracy = {category: rng.random() for category in CATEGORIES}
    weakest = sorted(CATEGORIES, key=lambda category: (accuracy[category], category))[:2]
    target = sample_problem(rng.choice(families_of(rng.choice(weakest), rng.choice(list(LEVEL_START)))), rng)
    ledger = Ledger()
    ledger.record_step(accuracy, target.concepts[:rng.randint(0, 2)], [], rng.sample(REJECT_REASONS, rng.randint(0, 2)),
                       1)
    report = build_context(ledger, list(CATEGORIES)).render()
    return report, render_card(TaskCard(problem=target.problem, answer=target.answer))


def synthesizer_settings(steps: int, seed: int) -> dict:
    rng = random.Random(seed)
    examples = [report_and_card(rng) for _ in range(50)]  # a change to the families or the report shows here
    return {"role": "synthesizer", "recipe": RECIPE_VERSION, "steps": steps, "seed": seed,
            "architecture": {**architecture(), "max_positions": MAX_POSITIONS},
            "data": settings_hash({"examples": examples})}


KIND = "synthesizers"


def cached_synthesizer(steps: int, seed: int) -> Path | None:
    return built_folder(synthesizer_settings(steps, seed), KIND)


def bootstrap_synthesizer(steps: int, seed: int = 0, out_dir: Path | None = None) -> Path:
    """The warm-started synthesizer folder: reused if already built with these settings, else trained."""
    settings = synthesizer_settings(steps, seed)
    target = Path(out_dir) if out_dir is not None else cached_folder(settings, KIND)

    def build(folder: Path) -> None:
        build_policy(folder, seed=seed, max_positions=MAX_POSITIONS, max_new_tokens=MAX_CARD_TOKENS)
        supervised_run(folder, steps, seed, report_and_card, "bootstrap synthesizer")

    return cached_build(target, settings, build)
