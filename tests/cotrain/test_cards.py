import pytest

from sws.cotrain.cards import CardError, TaskCard, parse_card, render_card


def test_final_answer_zero_is_an_answer():
    card = parse_card("problem: Compute 5 - 5.\nfinal_answer: 0")
    assert card.answer == "0"


def test_card_round_trips_and_keeps_braces():
    card = TaskCard(problem=r"Compute \frac{1}{2}+x^{2}.", answer="7")
    assert parse_card(render_card(card)) == card


def test_card_without_problem_is_refused_with_a_reason_code():
    with pytest.raises(CardError, match="no_problem"):
        parse_card("answer: 3")


def test_optional_fields_are_read():
    card = parse_card("intent: carries\nproblem: Compute 47 + 85.\ndifficulty: 0.4\nanswer: 132")
    assert (card.problem, card.answer, card.intent, card.difficulty) == ("Compute 47 + 85.", "132", "carries", 0.4)
