from __future__ import annotations

from sws.near_duplicates import NearDuplicateIndex, jaccard, problem_key, shingles

WORD_PROBLEM = ("A farmer has 48 sheep and buys 17 more at the market. Later he sells a third of his whole flock. "
                "How many sheep does the farmer have left?")


def index_of(*texts: str) -> NearDuplicateIndex:
    index = NearDuplicateIndex(threshold=0.9, min_chars=40)
    for number, text in enumerate(texts):
        index.add(text, f"seed:{number}")
    return index


def test_exact_duplicate_after_normalisation_is_found_even_when_short() -> None:
    index = index_of("Compute 47+85.")
    assert index.find("compute 47 + 85") == "seed:0"
    assert index.find("  Compute   47+85 .") == "seed:0"


def test_short_problems_differing_in_a_number_are_distinct() -> None:
    index = index_of("Compute 47+85.", "Compute 47*85.")
    assert index.find("Compute 47+86.") is None
    assert index.find("Compute 85-47.") is None


def test_commuted_operands_are_the_same_short_problem() -> None:
    assert index_of("Compute 47+85.").find("Compute 85+47.") == "seed:0"


def test_long_rewording_with_the_same_numbers_is_a_near_duplicate() -> None:
    index = index_of(WORD_PROBLEM)
    reworded = WORD_PROBLEM.replace("Later he sells", "Later, he sells").replace(" left?", " left now?")
    assert problem_key(reworded) != problem_key(WORD_PROBLEM)
    assert index.find(reworded) == "seed:0"


def test_long_problem_with_one_number_changed_is_distinct() -> None:
    index = index_of(WORD_PROBLEM)
    changed = WORD_PROBLEM.replace("48 sheep", "49 sheep")
    assert jaccard(shingles(problem_key(changed)), shingles(problem_key(WORD_PROBLEM))) > 0.9
    assert index.find(changed) is None


def test_unrelated_long_problem_is_distinct() -> None:
    index = index_of(WORD_PROBLEM)
    assert index.find("A train leaves the station at 48 km per hour and another follows at 17 km per hour.") is None


def test_threshold_is_respected() -> None:
    strict = NearDuplicateIndex(threshold=1.0, min_chars=40)
    strict.add(WORD_PROBLEM, "seed:0")
    assert strict.find(WORD_PROBLEM.replace(" left?", " left now?")) is None


def test_jaccard_bounds() -> None:
    assert jaccard(shingles("abcdef"), shingles("abcdef")) == 1.0
    assert jaccard(shingles("abcdef"), shingles("uvwxyz")) == 0.0
