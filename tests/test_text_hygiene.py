import pytest

from sws.problem_filters import prefilter_reason
from sws.text_hygiene import any_hostile, hostile_character, plain_text

HOSTILE = ["Compute 2+2.\x00", "\x1b[2JCompute 2+2.", "Compute 2+2.\x07", "Compute \u202e2+3\u202c.",
           "Compute \u2066x\u2069 + 1.", "Compute\x9b 2+2.", "Compute 2+2.\x7f", "Compute 2+2.\r"]


@pytest.mark.parametrize("text", HOSTILE)
def test_control_and_bidi_characters_are_named(text):
    assert hostile_character(text) is not None and hostile_character(text).startswith("U+")
    assert any_hostile(["fine", text])


def test_newlines_tabs_and_ordinary_unicode_pass():
    for text in ["Compute 2+2.\nThen\tadd 1.", "Find $\\sqrt{2}$ — in π-radians: ≤ 3½.", "求 2+2。", "", None]:
        assert hostile_character(text) is None


@pytest.mark.parametrize("text", HOSTILE)
def test_a_generated_problem_with_them_is_rejected_with_its_reason(text):
    assert prefilter_reason(text + " What is the sum of the first ten positive integers?", 10, 500) == \
        "control_characters"


def test_plain_text_loses_control_characters_and_markup_but_keeps_inequalities():
    assert plain_text("Counting\x1b[31m <script>alert(1)</script><b>sums</b>\u202e") == "Counting[31m sums"
    assert plain_text("if a<b and c>d, then <i>") == "if a<b and c>d, then "
    assert plain_text('x <img src=x onerror="alert(1)"/> y') == "x  y"
