import pytest

from sws.commuted import commuted_key
from sws.near_duplicates import NearDuplicateIndex, problem_key
from sws.records import content_id


@pytest.mark.parametrize(("left", "right"), [
    ("Compute 8+47.", "Compute 47+8."),
    ("Compute 3*12.", "Compute 12*3."),
    ("Compute 2+5*3.", "Compute 3*5+2."),
    ("Compute 5*(4+3).", "Compute (3+4)*5."),
    ("Compute 1+2+3.", "Compute 3+1+2."),
    ("What is 6 * 7?", "what is 7*6"),
])
def test_commuted_operands_are_one_problem(left: str, right: str) -> None:
    assert problem_key(left) == problem_key(right)


@pytest.mark.parametrize(("left", "right"), [
    ("Compute 47-8.", "Compute 8-47."),
    ("Compute 47+8.", "Compute 47+9."),
    ("Compute (3*5)+2.", "Compute 3*5+2."),  # parentheses a problem states are part of it
    ("Compute 3+(1+2).", "Compute 3+1+2."),
    ("Compute 47 mod 5.", "Compute 5 mod 47."),
])
def test_other_rearrangements_stay_distinct(left: str, right: str) -> None:
    assert problem_key(left) != problem_key(right)


@pytest.mark.parametrize("text", ["x-3+4", "2^3+4", "10/2+5", "0.5+3", "3+4x", "5-3", "compute (3+4"])
def test_a_run_touching_other_notation_or_without_a_commutative_operator_keeps_its_text(text: str) -> None:
    assert commuted_key(text) == text


def test_content_ids_and_the_duplicate_index_treat_twins_as_one() -> None:
    assert content_id("Compute 8+47.") == content_id("Compute 47+8.")
    assert content_id("Compute 8+47.") != content_id("Compute 8+46.")
    index = NearDuplicateIndex(threshold=0.9, min_chars=40)
    index.add("Compute 12*3.", "seed-1")
    assert index.find("Compute 3*12.") == "seed-1"
