"""Labels for a world that computes none (`World.truth` is None: math): a labeler engine's consistent samples.

Each problem gets N samples from the labeler (the `label` template and role, as `sws synthesize --sub-steps
label` asks it), answers grouped by the world's verifier (`sws.consistency`): the largest group's answer is the
label and its share the consistency, refused as the label step refuses it (`no_answer`, `tied_answers`,
`low_consistency`, `control_characters`). A batch is one engine call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sws import text_hygiene
from sws.config import EngineConfig
from sws.consistency import sample_answer, teacher_label, teacher_reason
from sws.engines import Engine
from sws.grading import equivalent, shared_pool
from sws.llm_calls import request_seed, role_request
from sws.prompts import PromptTemplate
from sws.verifier import Verifier
from sws.world import World

SEED_PART = "cotrain-label"


def labeled_by_samples(world: World) -> bool:
    """Whether the world computes no labels itself, so the labeler's consistent samples give them."""
    return world.truth("") is None


@dataclass(frozen=True)
class Label:
    answer: str | None
    consistency: float  # the largest answer group's share of the samples
    reject_reason: str | None


@dataclass(frozen=True)
class ConsistencyLabeler:
    engine: Engine
    role: EngineConfig
    template: PromptTemplate
    samples: int
    min_consistency: float
    verifier: Verifier
    seed: int

    def label(self, problems: Sequence[str]) -> list[Label]:
        if not problems:
            return []
        requests = [role_request(self.role, task="label", fields={"problem": problem},
                                 text=self.template.render({"problem": problem}), n=self.samples,
                                 seed=request_seed(self.seed, SEED_PART, problem))
                    for problem in problems]
        pool = shared_pool(self.verifier)
        labels = []
        for samples in self.engine.generate(requests):
            answer, consistency, tied = teacher_label([sample_answer(c, self.verifier) for c in samples], pool)
            reason = teacher_reason(answer, consistency, tied, self.min_consistency, weak_to_strong=False)
            if reason is None and text_hygiene.any_hostile([answer or ""]):
                reason = text_hygiene.REJECT_REASON
            labels.append(Label(answer, consistency, reason))
        return labels

    def agrees(self, label: str, answer: str) -> bool:
        """Whether the synthesizer's own answer states the label (the audit; ungraded counts as no)."""
        return equivalent(label, answer, shared_pool(self.verifier))
