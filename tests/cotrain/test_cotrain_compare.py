import pytest
from _cotrain_tables import write_arm

from sws.cotrain.compare import difference_table, is_cotraining_run, summaries
from sws.errors import UserError


def _run(folder, steps: dict[str, list[dict]]):
    for arm, rows in steps.items():
        write_arm(folder, arm, rows)
    return folder


def _productive(rates: list[float]) -> list[dict]:
    return [{"productive_rate": rate} for rate in rates]


def _rows(table) -> dict[str, list[str]]:
    return {label: [column._cells[row] for column in table.columns[1:]]
            for row, label in enumerate(table.columns[0]._cells)}


def test_productive_rate_difference_is_over_the_second_half_per_seed(tmp_path):
    runs = [_run(tmp_path / f"s{seed}", {"cotrained": _productive([0.0, 0.0, 0.5, 0.5 + seed / 10]),
                                        "frozen": _productive([1.0, 1.0, 0.25, 0.25])}) for seed in range(3)]
    found = summaries(runs)
    assert [summary["cotrained"]["productive_rate"] for summary in found] == pytest.approx([0.5, 0.55, 0.6])
    row = _rows(difference_table(runs, found))["cotrained − frozen: productive / generated"]
    assert row[:3] == ["+25.0", "+30.0", "+35.0"] and row[3:] == ["+30.0", "2.9", "yes"]


def test_a_synthesizer_that_does_worse_than_frozen_is_called_reversed_and_the_shuffled_control_is_compared(
        tmp_path):
    runs = [_run(tmp_path / f"s{seed}", {"cotrained": _productive([0.1, 0.1 + seed / 100]),
                                        "frozen": _productive([0.3, 0.3]), "shuffled": _productive([0.0, 0.0])})
            for seed in range(3)]
    rows = _rows(difference_table(runs, summaries(runs)))
    assert rows["cotrained − frozen: productive / generated"][-1] == "reversed"
    assert rows["cotrained − shuffled: productive / generated"][3] == "+11.0"
    assert rows["cotrained − shuffled: productive / generated"][-1] == "yes"


def test_a_synthesizer_that_only_writes_more_valid_tasks_gains_per_generated_task_not_per_valid_one(tmp_path):
    # co-trained: 8 of 16 cards valid, 4 productive; frozen: 4 valid, 2 productive, and 2 duplicates
    cotrained = {"productive_rate": 0.25, "valid": 8, "productive": 4, "sr_zero": 2, "duplicates": 0}
    frozen = {"productive_rate": 0.125, "valid": 4, "productive": 2, "sr_zero": 1, "duplicates": 2}
    runs = [_run(tmp_path / f"s{seed}", {"cotrained": [cotrained, {**cotrained, "productive": 4 + seed}],
                                        "frozen": [frozen, frozen]}) for seed in range(3)]
    rows = _rows(difference_table(runs, summaries(runs)))
    assert rows["cotrained − frozen: productive / generated"][:3] == ["+12.5"] * 3
    assert rows["cotrained − frozen: productive / valid"][:3] == ["+0.0", "+12.5", "+25.0"]
    assert rows["cotrained − frozen: never solved / valid"][:4] == ["+0.0"] * 4
    assert rows["cotrained − frozen: duplicates / valid"][3:] == ["-50.0", "0.0", "reversed"]


def test_a_difference_of_an_arm_with_no_valid_task_is_left_blank(tmp_path):
    runs = [_run(tmp_path / f"s{seed}", {"cotrained": [{"valid": 0}, {"valid": 0}],
                                        "frozen": [{"valid": 2, "productive": 1}] * 2}) for seed in range(2)]
    rows = _rows(difference_table(runs, summaries(runs)))
    assert rows["cotrained − frozen: productive / valid"] == ["–"] * 5  # both seeds, mean, SEM, > 2 SEM


def test_a_run_without_co_training_tables_names_the_command(tmp_path):
    assert not is_cotraining_run(tmp_path)
    with pytest.raises(UserError, match="sws run cotrain"):
        summaries([tmp_path])
