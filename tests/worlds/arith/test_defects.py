import random

import pytest

from sws.worlds.arith import DEFECT_KINDS, generate_problems, solve
from sws.worlds.arith.defects import inject_defect, near_miss


@pytest.mark.parametrize("kind", DEFECT_KINDS)
def test_every_injected_defect_is_recognised_as_that_defect(kind):
    rng = random.Random(kind)
    for problem in generate_problems(300, seed=11):
        text = inject_defect(kind, problem, rng)
        assert solve(text).kind == kind, text


@pytest.mark.parametrize("kind", ["multiple_choice", "answer_leak", "true_false"])
def test_defects_keep_the_problems_category(kind):
    rng = random.Random(0)
    for problem in generate_problems(120, seed=12):
        assert solve(inject_defect(kind, problem, rng)).category == problem.category


def test_near_miss_is_a_different_nonnegative_integer_close_to_the_value():
    rng = random.Random(0)
    for value in [0, 1, 9, 10, 47, 132, 999]:
        for _ in range(50):
            wrong = near_miss(value, rng)
            assert wrong != value and wrong >= 0 and abs(wrong - value) <= max(10, value)
