import pytest

from sws.worlds.arith.expressions import parse
from sws.worlds.arith.misconceptions import dropped_carry, misconceived_answer, smaller_from_larger


@pytest.mark.parametrize(("a", "b", "expected"), [(47, 8, 45), (15, 7, 12), (47, 85, 22), (99, 1, 90), (12, 3, 15)])
def test_dropped_carry_writes_each_column_digit(a, b, expected):
    assert dropped_carry(a, b) == expected


@pytest.mark.parametrize(("a", "b", "expected"), [(52, 7, 55), (15, 7, 12), (52, 17, 45), (30, 4, 34), (9, 2, 7)])
def test_smaller_from_larger_takes_the_smaller_digit_from_the_larger(a, b, expected):
    assert smaller_from_larger(a, b) == expected


@pytest.mark.parametrize(("text", "expected"), [
    ("47+8", 45), ("52-7", 55),  # one operation that carries or borrows: the misconception applies
    ("12+3", None), ("9-2", None), ("4*7", None), ("47 mod 5", None),  # nothing to carry or borrow
    ("5+7+8", None), ("(15-7)*2", None), ("3-15", None),  # not one non-negative column operation
])
def test_the_misconception_applies_only_to_one_carrying_or_borrowing_operation(text, expected):
    assert misconceived_answer(parse(text)) == expected
