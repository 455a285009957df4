"""The numbers of a co-training run per arm, from its tables, over the second half of its steps: productive
tasks (0 < sr < 1) per generated task; productive, never-solved (sr = 0) and duplicate tasks per valid task;
acceptance, distinct problems per batch, the synthesizer's mean reward; the reasoner's rollouts per step (over
all steps); and its held-out accuracy, overall and split by the initial reasoner's answers (Retain, Learn).
`sws run` prints them at the end of a co-training pipeline; the report and `sws compare` read them too."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from rich.console import Console
from rich.table import Table

from sws import ui
from sws.cotrain.arms import COTRAIN_ARMS, INITIAL_VALIDATION
from sws.tables import read_table, table_path

# Per valid task: the metrics table's count column each is the share of.
PER_VALID = {"productive_of_valid": "productive", "never_solved_of_valid": "sr_zero",
             "duplicates_of_valid": "duplicates"}
MEANS = ("productive_rate", "acceptance", "distinct_problems", "synth_reward_mean")
ArmNumbers = dict[str, float | None]

HEADERS = {"productive_rate": "productive / generated", "productive_of_valid": "productive / valid",
           "never_solved_of_valid": "never solved / valid", "duplicates_of_valid": "duplicates / valid",
           "acceptance": "acceptance", "distinct_problems": "distinct", "synth_reward_mean": "S reward",
           "reasoner_rollouts": "R rollouts / step", "heldout_accuracy": "held-out acc", "retain": "Retain",
           "learn": "Learn"}


def second_half(metrics: pl.DataFrame) -> pl.DataFrame:
    """The steps from half the arm's steps on (of 5 steps, the last 3)."""
    return metrics.filter(pl.col("step") >= (metrics["step"].max() + 1) // 2)


def per_valid_task(metrics: pl.DataFrame) -> ArmNumbers:
    """Each count over the valid tasks of all the given steps together (a step with more valid tasks weighs
    more); None where no step had a valid task."""
    valid = int(metrics["valid"].sum())
    return {name: int(metrics[count].sum()) / valid if valid else None for name, count in PER_VALID.items()}


def retain_and_learn(initial: pl.DataFrame | None, final: pl.DataFrame) -> ArmNumbers:
    """SynCo's split of the held-out tasks by the initial reasoner's answers: Retain, the final reasoner's
    accuracy on the tasks the initial one solved (any of its answers right), Learn on those it never solved. None
    without the initial answers, or where a side has no task."""
    if initial is None:
        return {"retain": None, "learn": None}
    solved = final.join(initial.select("task_id", "problem", (pl.col("n_correct") > 0).alias("initially_solved")),
                        on=["task_id", "problem"])
    return {name: _mean(solved.filter(pl.col("initially_solved") == was_solved)["accuracy"])
            for name, was_solved in (("retain", True), ("learn", False))}


def arm_numbers(metrics: pl.DataFrame, validation: pl.DataFrame, initial: pl.DataFrame | None) -> ArmNumbers:
    half = second_half(metrics)
    return {**{column: float(half[column].mean()) for column in MEANS}, **per_valid_task(half),
            # over every step: the reasoner's compute, equal in every arm unless a step ran out of tasks
            "reasoner_rollouts": float(metrics["reasoner_rollouts"].mean()),
            "heldout_accuracy": _mean(validation["accuracy"]), **retain_and_learn(initial, validation)}


def arm_summary(run_dir: Path) -> dict[str, ArmNumbers]:
    """Per arm with tables in the run: its numbers (`arm_numbers`)."""
    initial = read_table(run_dir, INITIAL_VALIDATION) if table_path(run_dir, INITIAL_VALIDATION).exists() else None
    summary = {}
    for arm in COTRAIN_ARMS:
        if table_path(run_dir, arm.metrics).exists() and table_path(run_dir, arm.validation).exists():
            summary[arm.name] = arm_numbers(read_table(run_dir, arm.metrics), read_table(run_dir, arm.validation),
                                            initial)
    return summary


def _mean(values: pl.Series) -> float | None:
    return float(values.mean()) if values.len() else None


def print_summary(run_dir: Path, console: Console | None = None) -> None:
    table = Table("arm", *HEADERS.values(), title="co-training, 2nd half of the steps")
    for name, numbers in arm_summary(run_dir).items():
        table.add_row(name, *(_cell(column, numbers[column]) for column in HEADERS))
    (console or ui.stdout_console()).print(table)


def _cell(column: str, value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.1f}" if column == "reasoner_rollouts" else f"{value:.3f}"
