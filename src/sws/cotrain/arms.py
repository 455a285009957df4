"""The co-training arms: one declaration each, read by the config, the tables, the stages and the report.

Every arm runs the same step at equal reasoner updates and rollouts per step; an arm is the switches it turns.
The frozen arm differs from the co-trained one by the synthesizer's update alone (the context stays live); the
static arm draws its tasks from the seed set instead of the synthesizer; the shuffled arm trains the synthesizer
on its rewards permuted within the batch (a negative control).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CotrainArm:
    name: str
    summary: str
    update_synthesizer: bool = True
    shuffle_synthesizer_rewards: bool = False
    # Tasks from the seed set instead of the synthesizer (which then is not trained).
    seed_set: bool = False

    @property
    def folder(self) -> str:
        return f"cotrain/{self.name}"

    @property
    def pool(self) -> str:
        return f"{self.folder}/pool"

    @property
    def metrics(self) -> str:
        return f"{self.folder}/metrics"

    @property
    def validation(self) -> str:
        return f"{self.folder}/validation"


COTRAIN_ARMS = (
    CotrainArm("cotrained", "the synthesizer and the reasoner trained together"),
    CotrainArm("frozen", "the synthesizer's update off, nothing else changed", update_synthesizer=False),
    CotrainArm("static", "the reasoner trained on the seed set", update_synthesizer=False, seed_set=True),
    CotrainArm("shuffled", "the synthesizer trained on rewards permuted within the batch",
               shuffle_synthesizer_rewards=True),
)

COTRAIN_ARM_NAMES = tuple(arm.name for arm in COTRAIN_ARMS)

# The initial reasoner's answers to the arms' held-out tasks: one table for every arm, which splits the tasks into
# those it solved (Retain) and those it did not (Learn).
INITIAL_VALIDATION = "cotrain/initial/validation"
