"""A third world, defined here and nowhere under src/: counting letters in words. It brings its own rule-based
teacher and policy engine, and the generic stages run on it from prepare to filter through the registry alone."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from word_world import RuleEngine

from sws import runner
from sws.config import PipelineConfig
from sws.engines import Request
from sws.errors import UserError
from sws.stages import filter as filter_stage
from sws.stages import identify, prepare, synthesize
from sws.tables import read_table, write_table
from sws.world import World, get_world, register_world, world_names
from sws.worlds.math.verifier import MathVerifier

WORDS = ("banana", "orchard", "pistachio", "kumquat", "tangerine", "avocado", "rhubarb", "quince", "apricot",
         "blueberry", "cranberry", "mulberry", "persimmon", "papaya", "guava", "lychee", "coconut", "grape")
LETTERS = {"vowels": set("aeiou"), "consonants": set("bcdfghjklmnpqrstvwxyz")}
CONCEPTS = {"vowels": ["vowel recognition", "counting letters", "spelling"],
            "consonants": ["consonant recognition", "counting letters", "spelling"]}
PROBLEM = re.compile(r"(vowels|consonants) in '([a-z]+)'")


def problem_text(category: str, word: str) -> str:
    return f"Count the {category} in '{word}'."


def true_answer(problem: str) -> str | None:
    found = PROBLEM.search(problem)
    return None if found is None else str(sum(letter in LETTERS[found.group(1)] for letter in found.group(2)))


def draw(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(json.dumps(parts, default=str).encode()).digest()[:4], "big")


class LettersEngine(RuleEngine):
    """Plays every role from the world's rules, in the formats real models write. As the policy (model
    `student`) it answers right on about half of its samples."""

    name = "lettercount"

    def answer(self, request: Request, index: int) -> str:
        fields = request.fields
        if request.task == "extract":
            return json.dumps(CONCEPTS[fields["category"]][:fields["k"]])
        if request.task == "generate":
            word = WORDS[draw(fields["concepts"], fields["level"], fields.get("instance", 0)) % len(WORDS)]
            return f"A {fields['level']} one.\n\n### Problem\n{problem_text(fields['category'], word)}\n"
        if request.task == "rate":
            return "Analysis: one word, one letter class, one integer answer.\nVerdict: perfect"
        answer = true_answer(fields["problem"])
        if self.model == "student" and draw(fields["problem"], request.seed, index) % 2:
            answer = str(int(answer) + 1)
        return f"Counting letter by letter.\nThe answer is \\boxed{{{answer}}}."


class LettersWorld(World):
    name = "lettercount"
    default_roles = {role: {"engine": "lettercount", "model": "rules"} for role in ("extractor", "generator", "labeler")}
    default_roles["judges"] = [{"engine": "lettercount", "model": "rules"}]
    engines = {"lettercount": LettersEngine}
    categories = ("vowels", "consonants")
    verifier = MathVerifier()  # integer answers in \\boxed{}

    def policy_prompt(self, problem: str) -> dict[str, Any]:
        return {"messages": ({"role": "user", "content": problem},)}


register_world(LettersWorld())


def seed_file(path: Path) -> Path:
    rows = [{"id": f"{category}-{word}", "problem": problem_text(category, word),
             "answer": true_answer(problem_text(category, word)), "category": category.upper()}
            for category in LETTERS for word in WORDS[:8]]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def test_the_registry_finds_the_built_in_worlds_and_a_registered_one() -> None:
    assert {"arith", "math", "lettercount"} <= set(world_names())
    assert get_world("lettercount").categories == ("vowels", "consonants")
    with pytest.raises(UserError, match="world 'nowhere' is not known"):
        get_world("nowhere")


def test_a_pipeline_names_an_unknown_world_in_one_line() -> None:
    with pytest.raises(ValueError, match="world 'nowhere' is not known; use one of: .*lettercount"):
        PipelineConfig.model_validate({"world": "nowhere"})


def test_a_third_world_runs_prepare_identify_synthesize_and_filter(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    cfg = PipelineConfig.model_validate({
        "world": "lettercount", "seed": 1,
        "prepare": {"input": str(seed_file(tmp_path / "seed.jsonl"))},
        "roles": {"policy": {"engine": "lettercount", "model": "student", "temperature": 1.0}},
        "synthesize": {"budget": 6, "concepts_per_problem": 3, "set_size": 2, "levels": ["easy", "hard"],
                       "label_samples": 3},
        "filter": {"rollouts": 4},
    })
    assert cfg.roles.generator.engine == "lettercount"

    runner.run(prepare.STAGE, cfg, run_dir)
    problems = read_table(run_dir, "problems")
    assert set(problems["category"]) == {"vowels", "consonants"}  # the world's spelling of VOWELS
    # The initial run's log: every vowel problem is never solved, every consonant problem always.
    write_table(run_dir, "rollouts", pl.DataFrame({
        "step": [step for _ in problems["problem_id"] for step in (1, 2)],
        "problem_id": [problem_id for problem_id in problems["problem_id"] for _ in (1, 2)],
        "n": [4] * (2 * problems.height),
        "n_correct": [0 if category == "vowels" else 4 for category in problems["category"] for _ in (1, 2)],
    }))
    runner.run(identify.STAGE, cfg, run_dir)
    categories = read_table(run_dir, "categories")
    assert dict(zip(categories["category"], categories["share"], strict=True)) == {"consonants": 0.0, "vowels": 1.0}

    synthesize.run(cfg, run_dir)
    labeled = read_table(run_dir, "labeled")
    assert labeled.height > 0 and set(labeled["category"]) == {"vowels"}
    assert all(answer == true_answer(problem) for problem, answer in labeled.select("problem", "answer").iter_rows())

    filter_stage.run(cfg, run_dir)
    scored, filtered = read_table(run_dir, "scored"), read_table(run_dir, "filtered")
    assert scored.height == labeled.height and (scored["n"] == 4).all()
    assert filtered.height > 0
    assert filtered["accuracy"].is_between(0.25, 0.75).all()


@pytest.mark.parametrize("name", ["lettercount", "wordsums"])
def test_no_file_under_src_names_a_test_world(name: str) -> None:
    source = Path(__file__).resolve().parents[1] / "src"
    assert not [path for path in source.rglob("*") if path.is_file() and name in path.read_bytes().decode(
        errors="ignore").lower()]


def test_a_world_without_a_verifier_is_refused_when_registered() -> None:
    class Unverified(World):
        name = "unverified"

    with pytest.raises(TypeError, match="world 'unverified' sets no verifier"):
        register_world(Unverified())
    assert "unverified" not in world_names()
