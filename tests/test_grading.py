"""The grading pool: deadlines, ungraded verdicts, majority groups, and grading with the verifier it is given."""

import random
import time

import pytest
from word_world import WordVerifier

from sws import grading
from sws.grading import AnswerGroup, GradingPool, group_answers
from sws.worlds.math.verifier import MathVerifier

MATH = MathVerifier()


@pytest.fixture(scope="module")
def pool():
    with GradingPool(MATH, workers=2, deadline_s=5.0) as shared:
        yield shared


def test_a_batch_keeps_the_order_of_its_pairs(pool):
    pairs = [(f"\\frac{{{n}}}{{2}}", f"{n / 2}" if n % 3 else f"{n / 2 + 1}") for n in range(60)]
    assert pool.grade(pairs) == [n % 3 != 0 for n in range(60)]



# ---------------------------------------------------------------- the hard deadline


def test_a_pair_past_its_deadline_is_ungraded_not_wrong_and_its_worker_is_replaced(impatient_pool, slow_to_grade):
    started = time.perf_counter()
    assert impatient_pool.grade([("2", slow_to_grade), ("3", None)]) == [None, False]
    assert time.perf_counter() - started < 0.5 + 0.5
    assert impatient_pool.timeouts == 1
    assert impatient_pool.grade([("\\frac{1}{2}", "0.5"), ("3", "4")]) == [True, False]


def test_an_ungraded_comparison_is_not_known_equal_and_merges_no_groups(impatient_pool, slow_to_grade):
    assert grading.equivalent("1", slow_to_grade, impatient_pool) is False
    assert group_answers(["2", slow_to_grade, "2"], impatient_pool) == [
        AnswerGroup("2", [0, 2]), AnswerGroup(slow_to_grade, [1])]
    assert impatient_pool.timeouts == 2


def test_graded_count_leaves_ungraded_verdicts_out_of_both_counts():
    assert grading.graded_count([True, None, False]) == (2, 1)
    assert grading.graded_count([None, None, True]) == (1, 1)


def test_pool_rejects_nonsense_settings():
    with pytest.raises(ValueError):
        GradingPool(MATH, workers=0)
    with pytest.raises(ValueError):
        GradingPool(MATH, deadline_s=0)


# ---------------------------------------------------------------- group_answers


def test_group_answers_groups_by_equivalence_largest_first(pool):
    answers = ["1/2", "0.5", None, "3", "\\frac{1}{2}", "3", "", "4", "0.5", "\\boxed{3}"]
    groups = group_answers(answers, pool)
    assert groups == [
        AnswerGroup(answer="0.5", members=[0, 1, 4, 8]),
        AnswerGroup(answer="3", members=[3, 5, 9]),
        AnswerGroup(answer="4", members=[7]),
    ]


def test_unparsed_answers_form_no_group(pool):
    assert group_answers([None, None, "  ", None], pool) == []
    assert group_answers([None, "7", None], pool) == [AnswerGroup("7", [1])]


def test_group_members_partition_the_parsed_answers(pool):
    rng = random.Random(1)
    spellings = {"1/4": ["0.25", "\\frac{1}{4}", "1/4"], "2": ["2", "2.0", "\\frac{4}{2}"], "-1": ["-1", "-1.00"]}
    answers = [rng.choice([*rng.choice(list(spellings.values())), None]) for _ in range(40)]
    groups = group_answers(answers, pool)
    members = sorted(index for group in groups for index in group.members)
    assert members == [index for index, answer in enumerate(answers) if answer is not None]
    assert len(groups) == 3
    assert [len(group.members) for group in groups] == sorted((len(group.members) for group in groups), reverse=True)


# ---------------------------------------------------------------- module-level functions on the shared pool


def test_the_shared_pool_can_be_closed_and_restarted_and_is_replaced_for_another_verifier():
    try:
        first = grading.shared_pool(MATH, workers=1)
        assert grading.equivalent("\\frac{3}{4}", "0.75", first)
        assert grading.shared_pool(MathVerifier(), workers=1) is first  # an equal verifier keeps the pool
        grading.close_pool()
        restarted = grading.shared_pool(MATH, workers=1)
        assert restarted is not first and grading.equivalent("10\\%", "0.1", restarted)
        words = grading.shared_pool(WordVerifier(), workers=1)
        assert words is not restarted and words.verifier == WordVerifier()
        assert grading.group_answers(["2", "2.0", "3"], words)[0] == AnswerGroup("2", [0])
    finally:
        grading.close_pool()


def test_a_worker_that_started_after_the_work_was_done_ends_quietly_when_the_pool_closes(capfd):
    # The second worker announces it is ready after the only pair is graded; its message is never read, and
    # closing a pipe with unread data resets it: the worker must take that as the end, not print a traceback.
    for _ in range(2):
        pool = GradingPool(MATH, workers=2)
        assert pool.grade([("\\frac{1}{2}", "0.5")]) == [True]
        time.sleep(3)
        pool.close()
    assert "Traceback" not in capfd.readouterr().err


# ---------------------------------------------------------------- the verifier the pool is given


def test_a_pool_grades_with_its_verifiers_extraction_spelling_and_equivalence(verifier_calls):
    with GradingPool(WordVerifier(), workers=1) as words:
        verdicts = grading.grade_completions(
            ["seven", "seven", "twenty one", "seven", "seven"],
            ["Result: Seven", "Result: seven ", "Result: Twenty-One.", "\\boxed{7}", "Result: eight"], words)
        groups = group_answers(["Seven", "seven", "SEVEN", None, "eight"], words)

    assert verdicts == [True, True, True, False, False]
    assert groups == [AnswerGroup("Seven", [0, 1, 2]), AnswerGroup("eight", [4])]
    calls = verifier_calls()
    # Same spelling ("seven" and "seven "), and no stated answer, need no worker; the rest ran in one.
    assert ["equivalent", "seven", "seven"] not in calls
    assert {tuple(call) for call in calls if call[0] == "equivalent"} == {
        ("equivalent", "seven", "Seven"), ("equivalent", "twenty one", "Twenty-One"), ("equivalent", "seven", "eight"),
        ("equivalent", "Seven", "seven"), ("equivalent", "Seven", "SEVEN"), ("equivalent", "Seven", "eight")}
    assert sum(call[0] == "extract" for call in calls) == 5


def test_math_verify_gets_word_answers_wrong_where_the_word_verifier_does_not(pool):
    pairs = [("twenty-four", "Twenty Four"), ("three", "there")]
    assert pool.grade(pairs) == [False, True]  # math-verify reads a word as the product of its letters
    with GradingPool(WordVerifier(), workers=1) as words:
        assert words.grade(pairs) == [True, False]
