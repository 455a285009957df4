"""Where the gain sits: differences by category and family, and how often each arm drew the weak problems."""

from __future__ import annotations

import polars as pl

from sws import gain_by_family
from sws.world import get_world


def eval_rows(checkpoint: str, right: dict[str, int]) -> list[dict]:
    """One weak_like row per problem, 4 samples each, `right[problem]` of them right."""
    category = {"Compute 47+85.": "addition", "Compute 41+23.": "addition", "Compute 52-7.": "subtraction"}
    return [{"checkpoint": checkpoint, "eval_set": "weak_like", "problem_id": problem, "category": category[problem],
             "greedy_correct": n_right > 2, "n": 4, "n_correct": n_right, "k": 4, "problem": problem}
            for problem, n_right in right.items()]


def test_each_difference_is_broken_down_by_category_and_by_the_worlds_family() -> None:
    problems = pl.DataFrame([
        *eval_rows("baseline", {"Compute 47+85.": 1, "Compute 41+23.": 2, "Compute 52-7.": 2}),
        *eval_rows("augmented", {"Compute 47+85.": 3, "Compute 41+23.": 2, "Compute 52-7.": 1}),
        {**eval_rows("augmented", {"Compute 52-7.": 4})[0], "eval_set": "weak"},  # not a held-out fresh problem
    ])
    found = gain_by_family.effects(problems, get_world("arith").family_of)
    points = {(row["kind"], row["group"]): row["points"] for row in found.iter_rows(named=True)}
    assert set(found["ahead"]) == {"augmented"} and set(found["behind"]) == {"baseline"}  # only arms evaluated
    assert points[("category", "addition")] == 25.0 and points[("category", "subtraction")] == -25.0
    assert points[("family", "addition: addition with carrying")] == 50.0
    assert points[("family", "addition: plain")] == 0.0
    assert points[("family", "subtraction: subtraction with borrowing")] == -25.0


def test_a_world_without_families_is_broken_down_by_category_only() -> None:
    problems = pl.DataFrame([*eval_rows("baseline", {"Compute 52-7.": 2}),
                             *eval_rows("augmented", {"Compute 52-7.": 3})])
    found = gain_by_family.effects(problems, lambda problem: None)
    assert found["kind"].to_list() == ["category"]


def test_an_arm_with_a_larger_training_set_draws_each_weak_problem_less_often() -> None:
    def log(steps: dict[int, list[str]]) -> pl.DataFrame:
        return pl.DataFrame([{"step": step, "problem_id": problem, "n": 4, "n_correct": 1}
                             for step, drawn in steps.items() for problem in drawn])

    draws = gain_by_family.weak_draws(
        {"baseline": log({1: ["w1", "s1"], 2: ["w1", "w2"]}), "augmented": log({1: ["w1", "x1"], 2: ["x2", "x3"]})},
        pl.Series(["w1", "w2", "w3"]))
    rows = {row["arm"]: row for row in draws.iter_rows(named=True)}
    assert rows["baseline"]["draws per weak problem"] == 1.0 and rows["baseline"]["weak problems never drawn"] == 1
    assert rows["augmented"]["draws per weak problem"] == 1 / 3 and rows["augmented"]["weak problems never drawn"] == 2


def test_the_mean_over_runs_has_a_standard_error_from_two_runs_on() -> None:
    one = pl.DataFrame({"kind": ["category"], "group": ["addition"], "n": [10], "ahead": ["augmented"],
                        "behind": ["baseline"], "ahead_avg_k": [0.5], "behind_avg_k": [0.4], "points": [10.0]})
    two = one.with_columns(points=pl.lit(20.0))
    [row] = gain_by_family.mean_effects([one, two]).iter_rows(named=True)
    assert (row["runs"], row["n"], row["points"]) == (2, 20, 15.0) and abs(row["sem"] - 5.0) < 1e-9


def test_kept_problems_follow_the_weak_concepts_within_one_weak_problem_or_only_within_the_category() -> None:
    weak = pl.DataFrame({"category": ["addition", "addition"], "concepts": [["carry", "two digits"], ["three addends"]]})

    def kept(*sets: list[str]) -> pl.DataFrame:
        return pl.DataFrame({"category": ["addition"] * len(sets), "concepts": list(sets)})

    found = gain_by_family.concept_match(
        {"targeted": kept(["carry"], ["carry", "two digits"], ["carry", "three addends"]),
         "untargeted": kept(["no carry"], ["carry"])}, weak)
    rows = {row["synthesis"]: row for row in found.iter_rows(named=True)}
    assert rows["targeted"]["kept"] == 3
    assert rows["targeted"]["within one weak problem's concepts"] == 2 / 3
    assert rows["targeted"]["within its category's weak concepts"] == 1.0
    assert rows["untargeted"]["within one weak problem's concepts"] == 0.5
