import pytest

from sws.worlds.arith.expressions import (
    ExpressionError,
    Undetermined,
    evaluate,
    has_borrow,
    has_carry,
    parse,
    render,
)


@pytest.mark.parametrize(
    ("text", "value"),
    [("47+85", 132), ("3+4*5", 23), ("(3+4)*5", 35), ("20-7-5", 8), ("99-(13+7)", 79), ("47 mod 5", 2),
     ("2*3+4*5", 26)],
)
def test_evaluate_follows_precedence_and_parentheses(text, value):
    assert evaluate(parse(text)) == value


@pytest.mark.parametrize("text", ["3+4*5", "(3+4)*5", "99-(13+7)", "47 mod 5", "12+7-5+9"])
def test_render_round_trips(text):
    assert render(parse(text)) == text


@pytest.mark.parametrize("text", ["", "3+", "(3+4", "3 4", "3/4", "__import__('os')"])
def test_non_expressions_are_rejected(text):
    with pytest.raises(ExpressionError):
        parse(text)


@pytest.mark.parametrize("text", ["47+x", "47 mod 0", "n*3"])
def test_unknowns_and_modulo_zero_have_no_value(text):
    with pytest.raises(Undetermined):
        evaluate(parse(text))


def test_carry_and_borrow_detection():
    assert has_carry(47, 85) and not has_carry(41, 35)
    assert has_borrow(52, 17) and not has_borrow(58, 17)
