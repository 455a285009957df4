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


def test_a_solution_runs_over_lines_up_to_the_next_key():
    card = parse_card("problem: Compute 47 + 85.\nsolution: 7 + 5 = 12, carry 1.\nso: 4 + 8 + 1 = 13.\n"
                      "Hence \\boxed{132}.\nanswer: 132\ncategory: addition")
    assert card.solution == "7 + 5 = 12, carry 1.\nso: 4 + 8 + 1 = 13.\nHence \\boxed{132}."
    assert (card.answer, card.category) == ("132", "addition")
    assert parse_card(render_card(TaskCard("Compute 6 * 7.", "42", solution="6 * 7 = 42\n\\boxed{42}"))) == (
        TaskCard("Compute 6 * 7.", "42", solution="6 * 7 = 42\n\\boxed{42}"))
    assert parse_card("problem: Compute 1 + 1.\nsolution:   \nanswer: 2").solution is None
