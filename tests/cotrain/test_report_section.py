from _cotrain_tables import ARMS, metrics_table, validation_table

from sws.cotrain.arms import INITIAL_VALIDATION
from sws.cotrain.report_section import arm_rows, initial_line


class TablesPage:
    """The report's page as the section reads it: tables by name."""

    def __init__(self, tables):
        self.tables = tables

    def table(self, name):
        return self.tables.get(name)


def test_the_first_table_shows_each_arm_per_generated_and_per_valid_task():
    steps = [{"valid": 2, "productive": 2, "reasoner_rollouts": 16},
             {"productive_rate": 0.125, "valid": 4, "productive": 1, "sr_zero": 3, "duplicates": 2,
              "sr_histogram": [3, 1, 0, 0], "reasoner_rollouts": 12}]
    page = TablesPage({ARMS["cotrained"].metrics: metrics_table(steps),
                       ARMS["cotrained"].validation: validation_table([("1+1", 4, 1), ("2+2", 4, 4)])})
    [row] = arm_rows(page)
    assert {name: row[name] for name in row if "2nd half" in name} == {
        "productive per generated (2nd half)": 0.125, "productive per valid (2nd half)": 0.25,
        "never solved per valid (2nd half)": 0.75, "duplicates per valid (2nd half)": 0.5,
        "sr histogram (quarters, 2nd half)": "3 / 1 / 0 / 0"}
    assert row["held-out accuracy"] == 0.625
    assert row["R rollouts per step"] == 14.0  # over every step, not the 2nd half


def test_retain_and_learn_are_shown_beside_the_held_out_accuracy_with_the_initial_reasoners_split():
    initial = validation_table([("1+1", 4, 0), ("2+2", 4, 3)])
    page = TablesPage({ARMS["frozen"].metrics: metrics_table([{}]),
                       ARMS["frozen"].validation: validation_table([("1+1", 4, 1), ("2+2", 4, 2)]),
                       INITIAL_VALIDATION: initial})
    [row] = arm_rows(page)
    assert (row["held-out accuracy"], row["Retain"], row["Learn"]) == (0.375, 0.5, 0.25)
    assert initial_line(initial) == ("The initial reasoner: held-out accuracy 0.375, 1 of 2 tasks solved (Retain's) "
                                     "and 1 never (Learn's).")
    [without] = arm_rows(TablesPage({name: table for name, table in page.tables.items() if name != INITIAL_VALIDATION}))
    assert (without["Retain"], without["Learn"]) == (None, None)
