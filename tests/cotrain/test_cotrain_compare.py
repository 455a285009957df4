import polars as pl
import pytest

from sws.cotrain.arms import COTRAIN_ARMS
from sws.cotrain.compare import difference_table, is_cotraining_run, summaries
from sws.errors import UserError
from sws.tables import COTRAIN_METRICS, COTRAIN_VALIDATION, empty_table, write_table


def _run(folder, productive: dict[str, list[float]]):
    for arm in COTRAIN_ARMS:
        rates = productive.get(arm.name)
        if rates is None:
            continue
        metrics = empty_table(arm.metrics).extend(pl.DataFrame(
            [{**{column: 0 if dtype == pl.Int64 else 1.0 for column, dtype in COTRAIN_METRICS.items()},
              "step": step, "productive_rate": rate, "sr_histogram": [0]} for step, rate in enumerate(rates)],
            schema=COTRAIN_METRICS))
        write_table(folder, arm.metrics, metrics)
        write_table(folder, arm.validation, pl.DataFrame(
            [{"task_id": 0, "problem": "Compute 1+1.", "answer": "2", "category": "addition", "k": 2,
              "n_correct": 1, "accuracy": 0.5}], schema=COTRAIN_VALIDATION))
    return folder


def test_productive_rate_difference_is_over_the_second_half_per_seed(tmp_path):
    runs = [_run(tmp_path / f"s{seed}", {"cotrained": [0.0, 0.0, 0.5, 0.5 + seed / 10],
                                        "frozen": [1.0, 1.0, 0.25, 0.25]}) for seed in range(3)]
    found = summaries(runs)
    assert [summary["cotrained"]["productive_rate"] for summary in found] == pytest.approx([0.5, 0.55, 0.6])
    table = difference_table(runs, found)
    cells = [column._cells[0] for column in table.columns]
    assert cells[1:4] == ["+25.0", "+30.0", "+35.0"] and cells[4:] == ["+30.0", "2.9", "yes"]


def test_a_synthesizer_that_does_worse_than_frozen_is_called_reversed_and_the_shuffled_control_is_compared(
        tmp_path):
    runs = [_run(tmp_path / f"s{seed}", {"cotrained": [0.1, 0.1 + seed / 100], "frozen": [0.3, 0.3],
                                        "shuffled": [0.0, 0.0]}) for seed in range(3)]
    table = difference_table(runs, summaries(runs))
    rows = {label: [column._cells[row] for column in table.columns[1:]]
            for row, label in enumerate(table.columns[0]._cells)}
    assert rows["cotrained − frozen"][-1] == "reversed"
    assert rows["cotrained − shuffled"][3] == "+11.0" and rows["cotrained − shuffled"][-1] == "yes"


def test_a_run_without_co_training_tables_names_the_command(tmp_path):
    assert not is_cotraining_run(tmp_path)
    with pytest.raises(UserError, match="sws run cotrain"):
        summaries([tmp_path])
