"""The numbers of a co-training run per arm, from its tables: the productive rate over the second half of the
steps (tasks with 0 < sr < 1 per generated task), acceptance, distinct problems per batch, the synthesizer's
mean reward and the reasoner's held-out accuracy. `sws run` prints them at the end of a co-training pipeline."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from rich.console import Console
from rich.table import Table

from sws.cotrain.arms import COTRAIN_ARMS
from sws.tables import table_path

COLUMNS = ("productive_rate", "acceptance", "distinct_problems", "synth_reward_mean", "heldout_accuracy")


def arm_summary(run_dir: Path) -> dict[str, dict[str, float]]:
    """Per arm with tables in the run: the means over the second half of its steps, and held-out accuracy."""
    summary = {}
    for arm in COTRAIN_ARMS:
        metrics_file, validation_file = table_path(run_dir, arm.metrics), table_path(run_dir, arm.validation)
        if not metrics_file.exists() or not validation_file.exists():
            continue
        metrics = pl.read_parquet(metrics_file)
        half = metrics.filter(pl.col("step") >= (metrics["step"].max() + 1) // 2)
        validation = pl.read_parquet(validation_file)
        summary[arm.name] = {
            **{column: float(half[column].mean()) for column in COLUMNS[:-1]},
            "heldout_accuracy": float(validation["accuracy"].mean()) if validation.height else float("nan"),
        }
    return summary


def print_summary(run_dir: Path, console: Console | None = None) -> None:
    table = Table("arm", "productive (2nd half)", "acceptance", "distinct", "S reward", "held-out acc",
                  title="co-training")
    for name, numbers in arm_summary(run_dir).items():
        table.add_row(name, *(f"{numbers[column]:.3f}" for column in COLUMNS))
    (console or Console()).print(table)
