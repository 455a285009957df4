import json
import re
from pathlib import Path

import pytest

from sws.config import EngineConfig
from sws.engines import Completion, Request
from sws.parsing import parse_concepts, parse_problem
from sws.stages.generate import screen_generation
from sws.worlds.arith import CATEGORIES, generate_problems, solve
from sws.worlds.arith.construct import LEVEL_DIGITS, category_vocabulary
from sws.worlds.arith.oracle import OracleEngine
from sws.worlds.arith.truth import family_of
from sws.worlds.arith.world import ORACLE

FAMILY_PINS = Path(__file__).parents[2] / "fixtures" / "arith_family_of.json"


def generate(category: str, concepts: list[str], level: str = "medium", seed: int = 0, instance: int = 0,
             **options) -> str:
    request = Request(prompt="p", task="generate", seed=seed,
                      fields={"category": category, "concepts": concepts, "level": level, "instance": instance})
    return OracleEngine(EngineConfig(**ORACLE, options=options)).generate([request])[0][0].text


def extracted(problems: list[str], k: int) -> list[list[str]]:
    requests = [Request(prompt="p", task="extract", seed=index, fields={"problem": problem, "k": k})
                for index, problem in enumerate(problems)]
    engine = OracleEngine(EngineConfig(**ORACLE))
    return [parse_concepts(samples[0].text) for samples in engine.generate(requests)]


@pytest.mark.parametrize("k", [5, 20])
def test_a_generated_problem_shows_every_requested_concept_of_real_problems(k):
    problems = generate_problems(240, seed=11)
    for problem, concepts in zip(problems, extracted([p.problem for p in problems], k), strict=True):
        text = generate(problem.category, concepts, problem.level, seed=len(concepts))
        truth = solve(parse_problem(text))
        assert truth.kind == "ok" and truth.category == problem.category, (problem, text)
        assert set(concepts) <= set(truth.concepts), (problem, concepts, text)


@pytest.mark.parametrize(("category", "concepts"), [
    ("addition", ["long division"]),
    ("addition", ["addition", "long division", "remainder of one", "squaring a number"]),
    ("remainders", ["place value"]),
    ("multi_step", ["precedence trap"]),
    ("geometry", ["addition"]),
])
def test_a_set_the_category_can_mostly_not_show_is_refused_and_the_generate_stage_rejects_it(category, concepts):
    text = generate(category, concepts)
    assert "I cannot build such a problem" in text and "### Problem" not in text
    problem, reason = screen_generation(Completion(text, len(text.split()), "stop"), 10, 400)
    assert (problem, reason) == (None, "refused")


@pytest.mark.parametrize(("category", "concepts", "one_of"), [
    ("addition", ["one-digit numbers", "three-digit numbers"], {"one-digit numbers", "three-digit numbers"}),
    ("subtraction", ["subtraction", "borrowing across a zero", "one-digit numbers"],
     {"borrowing across a zero", "one-digit numbers"}),
    ("addition", ["addition", "carrying into the tens", "long division"], {"long division"}),
])
def test_concepts_that_cannot_meet_in_one_problem_give_the_nearest_problem_naming_what_it_left_out(
        category, concepts, one_of):
    text = generate(category, concepts)
    shown = set(solve(parse_problem(text)).concepts)
    left_out = [concept for concept in concepts if concept not in shown]
    assert len(left_out) == 1 and left_out[0] in one_of, (text, shown)
    assert f"I leave out {left_out[0]}: no {category} problem I can write shows them with the rest." in text
    assert set(concepts) - set(left_out) <= shown


def test_unknown_concepts_are_named_as_ignored_and_the_known_ones_built():
    text = generate("subtraction", ["Borrowing  across a zero", "quantum borrowing"], "hard")
    assert "I leave out quantum borrowing" in text
    assert "borrowing across a zero" in solve(parse_problem(text)).concepts


def test_variants_of_one_request_differ_and_each_shows_the_set():
    concepts = ["multiplication", "multiplying by a one-digit number", "multiplication with carrying"]
    problems = [parse_problem(generate("multiplication", concepts, seed=3, instance=instance))
                for instance in range(8)]
    assert len(set(problems)) == 8
    assert all(set(concepts) <= set(solve(problem).concepts) for problem in problems)


def test_the_same_seed_gives_the_same_text_and_another_seed_another():
    request = ("precedence", ["precedence trap", "subtracting a product"], "hard")
    assert generate(*request, seed=5, ill_posed=0.3) == generate(*request, seed=5, ill_posed=0.3)
    assert generate(*request, seed=5) != generate(*request, seed=6)


def test_the_level_sets_the_size_of_the_numbers():
    def largest(level: str) -> list[int]:
        return [max(map(int, re.findall(r"\d+", parse_problem(generate("addition", ["addition"], level, seed)))))
                for seed in range(40)]
    assert max(largest("easy")) < 100 <= max(largest("hard"))
    assert sum(largest("easy")) < sum(largest("medium")) < sum(largest("hard"))


@pytest.mark.parametrize("level", ["easy", "medium"])
def test_the_generator_keeps_the_requested_levels_digit_counts_even_for_concepts_of_larger_numbers(level):
    # concepts of hard problems (three-digit numbers, carries into the hundreds) asked for at a lower level
    hard = [problem for problem in generate_problems(120, seed=5, levels=["hard"])]
    widest = max(LEVEL_DIGITS[level])
    for index, (problem, concepts) in enumerate(zip(hard, extracted([p.problem for p in hard], 5), strict=True)):
        text = generate(problem.category, concepts, level, seed=index)
        if "### Problem" not in text:
            continue  # refused: nothing written
        numbers = re.findall(r"\d+", parse_problem(text))
        assert max(len(number) for number in numbers) <= widest, (level, concepts, text)


@pytest.mark.parametrize(("problem", "concepts"), [
    ("Compute 403-158.", {"borrowing across a zero", "more than one borrow", "borrowing from the tens",
                          "borrowing from the hundreds", "crossing a hundred"}),
    ("Compute 40-18.", {"subtracting from a round number", "borrowing from the tens"}),
    ("Compute 3+4*5.", {"precedence trap"}),
    ("Compute 2+3*(4+1).", {"precedence trap", "parentheses that change the result"}),
    ("Compute (9-4)*3.", {"subtraction inside parentheses", "parentheses that change the result"}),
    ("Compute 50-3*9.", {"subtracting a product", "precedence trap"}),
    ("Compute 6*7+3*4.", {"adding or subtracting two products"}),
    ("Compute 20-5-3.", {"two subtractions in a row"}),
    ("Compute 956+78.", {"carrying into the tens", "carrying into the hundreds", "more than one carry",
                         "crossing a hundred"}),
    ("Compute 27+13.", {"making a ten", "carrying into the tens"}),
    ("Compute 7+85.", {"smaller number first"}),
    ("Compute 105*3.", {"multiplying with a zero digit", "multiplication with carrying", "a product over a hundred"}),
    ("Compute 7*7.", {"squaring a number"}),
    ("Compute 8 mod 13.", {"dividend smaller than the divisor", "dividing by a two-digit number"}),
    ("Compute 39 mod 10.", {"remainder one less than the divisor"}),
    ("Compute 22 mod 7.", {"remainder of one"}),
    ("Compute 47 mod 2.", {"even and odd numbers"}),
])
def test_structural_concepts_of_hand_picked_problems(problem, concepts):
    assert concepts <= set(solve(problem).concepts)


@pytest.mark.parametrize(("problem", "absent"), [
    ("Compute 4*5+3.", {"precedence trap"}),
    ("Compute 5*4.", {"smaller number first", "multiplication with carrying"}),
    ("Compute 23*3.", {"multiplication with carrying"}),
    ("Compute 52-27.", {"borrowing across a zero", "more than one borrow"}),
    ("Compute (4*5)+3.", {"parentheses that change the result"}),
    ("Compute 9-(3+2)+1.", {"two subtractions in a row"}),
])
def test_structural_concepts_a_problem_does_not_show(problem, absent):
    assert not absent & set(solve(problem).concepts)


def test_every_category_shows_a_rich_vocabulary_in_many_combinations():
    for category in CATEGORIES:
        assert len(category_vocabulary(category)) >= 12, category
        shown = {frozenset(solve(parse_problem(generate(category, [], level, seed))).concepts)
                 for seed in range(60) for level in ("easy", "medium", "hard")}
        assert len(shown) >= 15, (category, len(shown))


def test_family_of_is_what_it_was_before_the_structural_concepts():
    pins = json.loads(FAMILY_PINS.read_text())
    assert len(pins) > 150 and len(set(pins.values())) > 25
    assert {text: family_of(text) for text in pins} == pins
