"""A label from a labeler's consistent samples: the final answer of each sample, the answers grouped by the
world's verifier, the largest group's answer as the label and its share as the consistency, and why a label is
refused. `sws synthesize --sub-steps label` and co-training's card verifier (worlds without their own truth)
label this way."""

from __future__ import annotations

from sws.engines import Completion
from sws.grading import GradingPool, group_answers
from sws.verifier import Verifier

WEAK_TO_STRONG_MIN_CONSISTENCY = 0.5
# The reject reason of a problem whose largest answer group another group ties (4 of 8 against 4 of 8): a
# label needs a strict majority among the groups, whatever synthesize.min_consistency allows.
TIED = "tied_answers"


def sample_answer(completion: Completion, verifier: Verifier) -> str | None:
    """A labeler sample's final answer; None when it was cut off at max_tokens."""
    return None if completion.truncated else verifier.extract(completion.text)


def teacher_label(answers: list[str | None], pool: GradingPool) -> tuple[str | None, float, bool]:
    """The answer of the largest equivalence group, that group's share of all samples (None, 0 if none), and
    whether another group is as large (a tie: no majority names the label)."""
    groups = group_answers(answers, pool)
    if not groups:
        return None, 0.0, False
    tied = len(groups) > 1 and len(groups[1].members) == len(groups[0].members)
    return groups[0].answer, len(groups[0].members) / len(answers), tied


def teacher_labels(sampled: list[list[str | None]], pool: GradingPool) -> list[tuple[str | None, float, bool]]:
    """A grading body for an executor (`sws.executors`): `teacher_label` of each problem's sampled answers."""
    return [teacher_label(answers, pool) for answers in sampled]


def teacher_reason(answer: str | None, consistency: float, tied: bool, min_consistency: float,
                   weak_to_strong: bool) -> str | None:
    """Why a label is refused (`no_answer`, `tied_answers`, `low_consistency`), None when it stands."""
    if answer is None:
        return "no_answer"
    if tied:
        return TIED
    if consistency < min_consistency or (weak_to_strong and consistency <= WEAK_TO_STRONG_MIN_CONSISTENCY):
        return "low_consistency"
    return None
