from _cotrain_tables import write_arm, write_initial
from rich.console import Console

from sws.cotrain.summary import arm_summary, print_summary


def test_shares_per_valid_task_pool_the_second_halfs_valid_tasks(tmp_path):
    first_half = [{"valid": 4, "productive": 4}] * 2  # left out
    write_arm(tmp_path, "frozen", [*first_half, {"valid": 1, "productive": 1, "duplicates": 1},
                                   {"valid": 9, "productive": 0, "sr_zero": 9, "duplicates": 1}])
    numbers = arm_summary(tmp_path)["frozen"]
    # per step 1/1 and 0/9 (a mean of 0.5); over the half's 10 valid tasks 1/10
    assert (numbers["productive_of_valid"], numbers["never_solved_of_valid"], numbers["duplicates_of_valid"]) == (
        0.1, 0.9, 0.2)


def test_the_run_ends_with_a_table_of_each_arm_per_generated_and_per_valid_task(tmp_path):
    write_arm(tmp_path, "cotrained", [{"productive_rate": 0.25, "valid": 8, "productive": 4, "sr_zero": 2}] * 2)
    write_arm(tmp_path, "frozen", [{"valid": 0}] * 2)
    console = Console(record=True, width=200)
    print_summary(tmp_path, console)
    lines = console.export_text().splitlines()
    header = next(line for line in lines if "productive / generated" in line)
    assert "productive / valid" in header and "never solved / valid" in header and "duplicates / valid" in header
    cotrained = next(line for line in lines if "cotrained" in line).split("│")
    assert [cell.strip() for cell in cotrained[2:6]] == ["0.250", "0.500", "0.250", "0.000"]
    frozen = next(line for line in lines if "frozen" in line).split("│")
    assert [cell.strip() for cell in frozen[3:6]] == ["–", "–", "–"]  # no valid task: no share of one


def test_retain_and_learn_split_the_held_out_tasks_by_the_initial_reasoners_answers(tmp_path):
    # the initial reasoner solved a and c (any answer right), never b or d
    write_initial(tmp_path, [("a", 4, 2), ("b", 4, 0), ("c", 4, 1), ("d", 4, 0)])
    write_arm(tmp_path, "cotrained", [{}], validation=[("a", 4, 4), ("b", 4, 2), ("c", 4, 0), ("d", 4, 1)])
    write_arm(tmp_path, "frozen", [{}], validation=[("a", 4, 3), ("b", 4, 0), ("c", 4, 3), ("d", 4, 0)])
    summary = arm_summary(tmp_path)
    assert (summary["cotrained"]["retain"], summary["cotrained"]["learn"]) == (0.5, 0.375)
    assert (summary["frozen"]["retain"], summary["frozen"]["learn"]) == (0.75, 0.0)
    assert (summary["cotrained"]["heldout_accuracy"], summary["frozen"]["heldout_accuracy"]) == (0.4375, 0.375)


def test_without_the_initial_reasoners_answers_retain_and_learn_are_empty(tmp_path):
    write_arm(tmp_path, "cotrained", [{}], validation=[("a", 4, 4)])
    console = Console(record=True, width=250)
    print_summary(tmp_path, console)
    lines = console.export_text().splitlines()
    header = [cell.strip() for cell in next(line for line in lines if "Retain" in line).split("┃")]
    row = [cell.strip() for cell in next(line for line in lines if "cotrained" in line).split("│")]
    assert header[-3:-1] == ["Retain", "Learn"] and row[-3:-1] == ["–", "–"]


def test_a_side_no_task_falls_on_is_empty_not_zero(tmp_path):
    write_initial(tmp_path, [("a", 2, 2), ("b", 2, 1)])  # solved both: nothing to learn
    write_arm(tmp_path, "frozen", [{}], validation=[("a", 2, 0), ("b", 2, 1)])
    numbers = arm_summary(tmp_path)["frozen"]
    assert (numbers["retain"], numbers["learn"]) == (0.25, None)
