import polars as pl

from sws import answer
from sws.tables import SCHEMAS


def per_problem(correct: dict[str, list[int]]) -> pl.DataFrame:
    """One held-out set, 4 samples per problem; `correct[arm][i]`: right samples on problem i."""
    return pl.DataFrame([{"checkpoint": arm, "eval_set": "held", "problem_id": f"p{i}", "category": "c",
                          "greedy_correct": right > 2, "n": 4, "n_correct": right, "k": 4, "problem": "?"}
                         for arm, rights in correct.items() for i, right in enumerate(rights)],
                        schema=SCHEMAS["eval/problems"])


def test_each_arm_gets_its_share_with_its_error_and_each_difference_its_paired_error_in_points() -> None:
    table = answer.answer_table(per_problem({"baseline": [0, 1, 2, 1], "augmented": [2, 3, 4, 3]}), ["held"])
    # shares 25 % and 75 %, sd 0.204 over 4 problems; every paired difference is +2 of 4: no spread
    assert table.to_dict(as_series=False) == {
        answer.FIRST_COLUMN: ["seed only", "synthetic", "synthetic − seed only"],
        "held (n=4)": ["25.0 % ± 10.2", "75.0 % ± 10.2", "+50.0 ± 0.0 pts"]}


def test_a_difference_is_marked_where_it_clears_two_standard_errors() -> None:
    clear = answer.answer_table(per_problem({"baseline": [0, 1, 0, 1], "augmented": [2, 2, 1, 3]}), ["held"])
    noise = answer.answer_table(per_problem({"baseline": [0, 4, 0, 1], "augmented": [4, 0, 1, 1]}), ["held"])
    assert clear["held (n=4)"][-1] == "+37.5 ± 7.2 pts *"
    assert noise["held (n=4)"][-1].endswith("pts")


def test_a_set_no_arm_was_evaluated_on_is_left_out() -> None:
    assert answer.answer_table(per_problem({"baseline": [1], "augmented": [2]}), ["other"]).is_empty()


def test_a_difference_that_rounds_to_zero_reads_plus_zero() -> None:
    assert answer.Estimate(-0.0004, 0.006).as_points() == "+0.0 ± 0.6 pts"
    assert answer.Estimate(-0.004, None).as_points() == "-0.4 pts"
