"""The math verifier: answer extraction, and math-verify equivalence on real MATH answers and hostile ones."""

import json
import multiprocessing
import random
import re
import time

import pytest

from sws.grading import GradingPool, grade_completions
from sws.records import DATA_DIR
from sws.worlds.math.verifier import MathVerifier, extract_answer

MATH_TRAIN = DATA_DIR / "math_train.json"


@pytest.fixture(scope="module")
def pool():
    with GradingPool(MathVerifier(), workers=2, deadline_s=5.0) as shared:
        yield shared


@pytest.fixture(scope="module")
def math_answers() -> list[str]:
    answers = [row["answer"] for row in json.loads(MATH_TRAIN.read_text()) if row["answer"]]
    return random.Random(0).sample(answers, 150)


# ---------------------------------------------------------------- extract_answer


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("So we get \\boxed{3} first, then \\boxed{\\frac{1}{\\sqrt{2}}}.", "\\frac{1}{\\sqrt{2}}"),
        ("\\boxed{\\left\\{ 1, 2 \\right\\}}", "\\left\\{ 1, 2 \\right\\}"),
        ("$\\boxed{x^{2^{3}}+\\frac{a}{b_{1}}}$", "x^{2^{3}}+\\frac{a}{b_{1}}"),
        ("The total is \\boxed 5.", "5"),
        ("hence \\fbox{42}", "42"),
        ("\\boxed {7}", "7"),
        ("\\boxed{12}. The answer is 13.", "12"),
        ("Thus the answer is $\\frac{1}{2}$.", "\\frac{1}{2}"),
        ("The answer is 4. Wait, the final answer is 6", "6"),
        ("Answer: -3", "-3"),
        ("She makes 9 * 2 = $18.\n#### 18", "18"),
        ("I cannot solve this.", None),
        ("", None),
        ("\\boxed{}", None),
    ],
)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


def test_a_last_box_left_open_is_no_answer_even_after_a_complete_one():
    assert extract_answer("first \\boxed{2} then \\boxed{\\frac{1}{3}") is None


def test_extract_answer_is_not_fooled_by_similar_commands():
    assert extract_answer("\\boxedtext{1} and \\fboxsep 3") is None


def test_extract_answer_finds_the_box_after_100_kb_of_text():
    text = "Let me think. " * 7_500 + "So the result is \\boxed{7}."
    started = time.perf_counter()
    assert extract_answer(text) == "7"
    assert time.perf_counter() - started < 1.0


# ---------------------------------------------------------------- equivalence on real MATH answers


def test_every_math_answer_is_equivalent_to_itself_and_to_its_boxed_form(pool, math_answers):
    assert all(pool.grade([(answer, answer) for answer in math_answers]))
    # The boxed spelling differs as a string, so this goes through math-verify.
    assert all(pool.grade([(answer, f"\\boxed{{{answer}}}") for answer in math_answers]))


def test_changing_a_digit_of_a_math_answer_breaks_equivalence(pool, math_answers):
    with_digits = [answer for answer in math_answers if re.search(r"\d", answer)]
    changed = [re.sub(r"\d", lambda digit: str((int(digit.group()) + 1) % 10), answer, count=1)
               for answer in with_digits]
    verdicts = pool.grade(list(zip(with_digits, changed, strict=True)))
    assert not any(verdicts), [pair for pair, same in zip(zip(with_digits, changed, strict=True), verdicts, strict=True) if same]


def test_fraction_answers_match_their_decimal_and_slash_rewrites(pool):
    rows = json.loads(MATH_TRAIN.read_text())
    # Fractions with a terminating decimal, so the decimal rewrite is exact.
    fractions = sorted({row["answer"] for row in rows
                        if row["answer"] and re.fullmatch(r"\\frac\{\d+\}\{(2|4|5|8|10)\}", row["answer"])})
    assert len(fractions) >= 10
    rewrites, changed = [], []
    for fraction in fractions:
        numerator, denominator = map(int, re.findall(r"\d+", fraction))
        rewrites += [(fraction, f"{numerator / denominator}"), (fraction, f"{numerator}/{denominator}"),
                     (fraction, f"\\dfrac{{{numerator}}}{{{denominator}}}"), (f"{numerator}/{denominator}", fraction)]
        changed += [(fraction, f"{numerator + 1}/{denominator}"), (fraction, f"{numerator / denominator + 0.1}")]
    assert all(pool.grade(rewrites))
    assert not any(pool.grade(changed))


@pytest.mark.parametrize(
    ("gold", "pred", "expected"),
    [
        ("\\frac{1}{2}", "0.5", True),
        ("\\frac{1}{2}", "1/2", True),
        ("0.5", "\\frac12", True),
        ("$\\frac{1}{2}$", "\\boxed{0.5}", True),
        ("x^2+1", "1+x^2", True),
        ("(1,2)", "\\left( 1, 2 \\right)", True),
        ("\\frac{1}{2}", "0.6", False),
        ("3", "-3", False),
        ("12", "21", False),
        ("3", None, False),
        ("3", "   ", False),
    ],
)
def test_grade_pairs(pool, gold, pred, expected):
    assert pool.grade([(gold, pred)]) == [expected]


def test_plain_integers_are_compared_without_starting_a_worker():
    running_before = set(multiprocessing.active_children())
    with GradingPool(MathVerifier(), workers=1) as fresh_pool:
        huge = "9" * 10_000
        verdicts = fresh_pool.grade([("7", "007"), ("-0", "0"), ("+12", "12"), ("12", "-12"), (huge, huge + "9"),
                                     (huge, f"${huge}$")])
        assert verdicts == [True, True, True, False, False, True]
        assert set(multiprocessing.active_children()) == running_before


# ---------------------------------------------------------------- model outputs against reference answers


def test_integer_answers_are_compared_as_numbers(pool):
    answers = ["12", "12", "-7", "40", "5"]
    completions = ["\\boxed{12}", "\\boxed{13}", "\\boxed{-07}", "so \\boxed{+40}", "5"]

    assert grade_completions(answers, completions, pool) == [True, False, True, True, False]


def test_a_completion_without_a_final_answer_is_wrong(pool):
    assert grade_completions(["3", "3"], ["\\boxed{", ""], pool) == [False, False]


def test_non_integer_answers_are_graded_by_equivalence(pool):
    answers = ["\\frac{1}{2}", "\\frac{1}{2}", "x^2+1"]
    completions = ["\\boxed{0.5}", "\\boxed{\\frac{1}{3}}", "The answer is \\boxed{1 + x^2}."]

    assert grade_completions(answers, completions, pool) == [True, False, True]


def test_a_completion_graded_past_the_deadline_is_ungraded_not_wrong(impatient_pool, slow_to_grade):
    completions = [f"\\boxed{{{slow_to_grade}}}", "no answer at all", "\\boxed{\\frac{8}{2}}"]

    assert grade_completions(["2", "3", "4"], completions, impatient_pool) == [None, False, True]



# ---------------------------------------------------------------- adversarial inputs and the hard deadline

ADVERSARIAL = {
    "100 kB of text": "x" * 100_000,
    "100 kB of digits and operators": "1+" * 50_000 + "1",
    "unbalanced braces": "\\frac{1}{2" + "{" * 2_000,
    "tower of powers": "\\boxed{9^{9^{9^{9}}}}",
    "deeply nested fractions": "\\frac{1}{" * 300 + "2" + "}" * 300,
    "deep parentheses": "(" * 5_000 + "1" + ")" * 5_000,
}


@pytest.fixture(scope="module")
def strict_pool():
    with GradingPool(MathVerifier(), workers=1, deadline_s=2.0) as one_worker:
        yield one_worker


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_adversarial_prediction_is_graded_within_the_deadline(strict_pool, name):
    strict_pool.grade([("1", "1.0")])  # the worker is up; what follows measures grading alone
    started = time.perf_counter()
    verdicts = strict_pool.grade([("2", ADVERSARIAL[name]), ("\\frac{1}{2}", ADVERSARIAL[name])])
    elapsed = time.perf_counter() - started
    assert not any(verdicts)  # wrong, or ungraded where only the deadline ended it; never equivalent
    assert elapsed < 2 * (2.0 + 0.5)  # two pairs, one worker: each within its deadline plus IPC slack
    assert strict_pool.grade([("\\frac{1}{2}", "0.5")]) == [True]
