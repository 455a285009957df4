import pytest

from sws.errors import UserError
from sws.near_duplicates import problem_key
from sws.worlds.arith import CATEGORIES, LEVELS, generate_problems, solve
from sws.worlds.arith.families import FAMILIES, category_concepts, families_of


def test_every_category_has_a_family_at_every_level():
    for category in CATEGORIES:
        for level in LEVELS:
            assert families_of(category, level), (category, level)


def test_generation_is_reproducible_and_seed_dependent():
    assert generate_problems(60, seed=3) == generate_problems(60, seed=3)
    assert generate_problems(60, seed=3) != generate_problems(60, seed=4)


def test_categories_and_levels_are_balanced():
    problems = generate_problems(180, seed=0)
    for category in CATEGORIES:
        for level in LEVELS:
            assert sum(p.category == category and p.level == level for p in problems) == 10


def test_filters_by_category_and_level():
    problems = generate_problems(40, seed=1, categories=["remainders", "precedence"], levels=["easy"])
    assert {p.category for p in problems} == {"remainders", "precedence"}
    assert {p.level for p in problems} == {"easy"}


def test_problems_are_short_distinct_and_answers_small_integers():
    problems = generate_problems(420, seed=0)
    assert len({problem_key(p.problem) for p in problems}) == 420  # no repeat, no commuted twin
    assert max(len(p.problem) for p in problems) <= 40
    assert all(p.answer.isdigit() and len(p.answer) <= 5 for p in problems)


def test_solve_agrees_with_every_generated_problem():
    for problem in generate_problems(1200, seed=7):
        truth = solve(problem.problem)
        assert (truth.kind, truth.answer, truth.category, truth.concepts) == (
            "ok", problem.answer, problem.category, problem.concepts), problem


def test_family_concepts_are_carried_by_every_problem_it_makes():
    for problem in generate_problems(1200, seed=8):
        family = next(f for f in FAMILIES if f.name == problem.family)
        assert set(family.concepts) <= set(problem.concepts), problem


def test_categories_have_five_to_eight_concepts_some_shared():
    concept_sets = {category: set(category_concepts(category)) for category in CATEGORIES}
    assert all(5 <= len(concepts) <= 8 for concepts in concept_sets.values()), concept_sets
    assert concept_sets["addition"] & concept_sets["multi_step"]
    assert concept_sets["multiplication"] & concept_sets["remainders"]


def test_unknown_names_are_user_errors():
    with pytest.raises(UserError, match="unknown arith category 'division'"):
        generate_problems(5, seed=0, categories=["division"])
    with pytest.raises(UserError, match="unknown arith level 'expert'"):
        generate_problems(5, seed=0, levels=["expert"])
