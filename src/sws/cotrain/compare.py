"""`sws compare` over co-training runs (seeds): co-trained − frozen, co-trained − shuffled and shuffled − frozen
over the second half of training, per generated task (productive) and per valid task (productive, never solved,
duplicates), per seed, with mean, SEM and whether the mean clears two SEM; each arm's held-out accuracy, Retain
and Learn, distinct problems per batch and reasoner rollouts per step across seeds. Reuses `sws.compare`'s
spread and formats."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from sws.compare import beyond_two_sem, points, points_apart, share, spread
from sws.cotrain.arms import COTRAIN_ARM_NAMES
from sws.cotrain.summary import HEADERS, ArmNumbers, arm_summary
from sws.errors import UserError
from sws.experiment_check import check_seeds_of_one_experiment

DIFFERENCES = (("cotrained", "frozen"), ("cotrained", "shuffled"), ("shuffled", "frozen"))
# Each difference is taken per generated task and per valid task: a synthesizer that only writes more valid
# tasks raises the first and leaves the second.
MEASURES = ("productive_rate", "productive_of_valid", "never_solved_of_valid", "duplicates_of_valid")


def is_cotraining_run(run_dir: Path) -> bool:
    return bool(arm_summary(run_dir))


def summaries(runs: list[Path]) -> list[dict[str, ArmNumbers]]:
    """Each run's arm summary, once the runs are seeds of one experiment (`sws.experiment_check`)."""
    check_seeds_of_one_experiment(runs)
    found = [arm_summary(run) for run in runs]
    for run, summary in zip(runs, found, strict=True):
        if not summary:
            raise UserError(f"{run}: no co-training tables; run `sws run cotrain --run {run}` first")
    return found


def difference_table(runs: list[Path], found: list[dict[str, ArmNumbers]]) -> Table:
    table = Table("2nd half (points)", *(run.name for run in runs), "mean", "SEM", "> 2 SEM",
                  title="co-training: per generated and per valid task")
    for arm, against in DIFFERENCES:
        for measure in MEASURES:
            values = [_difference(summary, arm, against, measure) for summary in found]
            measured = spread(values)
            table.add_row(f"{arm} − {against}: {HEADERS[measure]}", *map(points, values),
                          points(measured.mean), points_apart(measured.sem), beyond_two_sem(measured),
                          end_section=measure == MEASURES[-1])
    return table


def _difference(summary: dict[str, ArmNumbers], arm: str, against: str, measure: str) -> float | None:
    left, right = (summary[name][measure] if name in summary else None for name in (arm, against))
    return None if left is None or right is None else left - right


def arms_table(found: list[dict[str, ArmNumbers]]) -> Table:
    table = Table("arm", "seeds", "productive", "held-out accuracy", "SEM", "Retain", "Learn", "distinct / frozen's",
                  "R rollouts / step", title="co-training arms across seeds")
    for arm in COTRAIN_ARM_NAMES:
        present = [summary for summary in found if arm in summary]
        if not present:
            continue
        accuracy = spread([summary[arm]["heldout_accuracy"] for summary in present])
        productive = spread([summary[arm]["productive_rate"] for summary in present])
        distinct = spread([summary[arm]["distinct_problems"] / summary["frozen"]["distinct_problems"]
                           for summary in present if "frozen" in summary])
        rollouts = spread([summary[arm]["reasoner_rollouts"] for summary in present])
        retain, learn = (spread([summary[arm][name] for summary in present]) for name in ("retain", "learn"))
        table.add_row(arm, str(len(present)), share(productive.mean), share(accuracy.mean),
                      share(accuracy.sem), share(retain.mean), share(learn.mean),
                      "–" if distinct.mean is None else f"{distinct.mean:.2f}",
                      f"{rollouts.mean:.1f}")
    return table
