"""Co-training tables as a run holds them, built from the few columns a test sets."""

import polars as pl

from sws.cotrain.arms import COTRAIN_ARMS, INITIAL_VALIDATION
from sws.tables import COTRAIN_METRICS, COTRAIN_VALIDATION, write_table

ARMS = {arm.name: arm for arm in COTRAIN_ARMS}


def metrics_table(steps: list[dict]) -> pl.DataFrame:
    """One row per step from its given columns; the others 0 (counts) or 1.0 (shares)."""
    defaults = {column: 0 if dtype == pl.Int64 else 1.0 for column, dtype in COTRAIN_METRICS.items()}
    return pl.DataFrame([{**defaults, "sr_histogram": [0], "step": step, **columns}
                         for step, columns in enumerate(steps)], schema=COTRAIN_METRICS)


def validation_table(tasks: list[tuple[str, int, int]]) -> pl.DataFrame:
    """(problem, k, n_correct) per held-out task."""
    return pl.DataFrame([{"task_id": index, "problem": problem, "answer": "2", "category": "addition", "k": k,
                          "n_correct": n_correct, "accuracy": n_correct / k}
                         for index, (problem, k, n_correct) in enumerate(tasks)], schema=COTRAIN_VALIDATION)


def write_arm(folder, arm: str, steps: list[dict], validation: list[tuple[str, int, int]] = (("1+1", 2, 1),)):
    write_table(folder, ARMS[arm].metrics, metrics_table(steps))
    write_table(folder, ARMS[arm].validation, validation_table(list(validation)))
    return folder


def write_initial(folder, validation: list[tuple[str, int, int]]):
    write_table(folder, INITIAL_VALIDATION, validation_table(validation))
