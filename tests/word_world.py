"""A test world whose answers are words ("What is twenty plus four?" -> "twenty-four"), defined here and nowhere
under src/, with its own verifier: answers compare up to case, spaces and hyphens, which math-verify gets wrong
(it reads a word as the product of its letters, so "Twenty Four" differs from "twenty-four" while "three" equals
"there"). Its outputs state the answer on a last `Result: <words>` line, which the math verifier would not find.

The verifier records each call (extract, equivalent) as a JSON line appended to the file the environment
variable `WORDSUMS_VERIFIER_CALLS` names, from whichever process makes it (the grading workers included), so a
test can prove that the world's verifier graded. Its rule-based engine plays every teacher role and, as model
`student`, a policy that is right on about half of its samples. Importing this module registers the world.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from sws.engines import Completion, Engine, Request
from sws.near_duplicates import problem_key
from sws.training.rewards import RewardBatch, register_reward
from sws.verifier import Verifier
from sws.world import PROBLEM_SET_SCHEMA, World, register_world

NAME = "wordsums"
CALLS_ENV = "WORDSUMS_VERIFIER_CALLS"
ONES = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten", "eleven", "twelve",
        "thirteen", "fourteen", "fifteen", "sixteen", "seventeen", "eighteen", "nineteen")
TENS = ("twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
NUMBER_WORDS = tuple(ONES[n] if n < 20 else TENS[n // 10 - 2] + (f"-{ONES[n % 10]}" if n % 10 else "")
                     for n in range(100))
OPERATIONS = {"addition": "plus", "subtraction": "minus"}
CONCEPTS = {"addition": ["number words", "adding small numbers", "counting on"],
            "subtraction": ["number words", "taking away", "counting back"]}
PROBLEM = re.compile(r"What is ([a-z-]+) (plus|minus) ([a-z-]+)\?")
RESULT = re.compile(r"^Result:[ \t]*(.*)$", re.MULTILINE)
RULES = {"engine": NAME, "model": "rules"}
HELDOUT_SEED = 7919


def record(*call: str) -> None:
    path = os.environ.get(CALLS_ENV)
    if path:
        with open(path, "a") as log:
            log.write(json.dumps(call) + "\n")


def read_calls(path: Path) -> list[list[str]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.is_file() else []


def canonical(words: str) -> str:
    return " ".join(words.lower().replace("-", " ").split())


@dataclass(frozen=True)
class WordVerifier(Verifier):
    """The last `Result:` line's words; equal up to case, spaces and hyphens."""

    def extract(self, text: str) -> str | None:
        record("extract", text)
        lines = RESULT.findall(text)
        return (lines[-1].strip().rstrip(".").strip() or None) if lines else None

    def equivalent(self, reference: str, answer: str) -> bool:
        record("equivalent", reference, answer)
        return canonical(reference) == canonical(answer)


def problem_text(category: str, first: int, second: int) -> str:
    return f"What is {NUMBER_WORDS[first]} {OPERATIONS[category]} {NUMBER_WORDS[second]}?"


def true_answer(problem: str) -> str | None:
    found = PROBLEM.search(problem)
    if found is None:
        return None
    first, second = NUMBER_WORDS.index(found.group(1)), NUMBER_WORDS.index(found.group(3))
    return NUMBER_WORDS[first + second if found.group(2) == "plus" else first - second]


def operands(category: str, draw: int) -> tuple[int, int]:
    """Two operands whose sum or difference is a number word (0 to 99), from a number."""
    if category == "subtraction":
        first = draw % 100
        return first, (draw // 100) % (first + 1)
    return draw % 50, (draw // 50) % 50


def problems(category: str, count: int, seed: int) -> list[str]:
    return [problem_text(category, *operands(category, draw(seed, category, index))) for index in range(count)]


def draw(*parts: Any) -> int:
    return int.from_bytes(hashlib.sha256(json.dumps(parts, default=str).encode()).digest()[:4], "big")


def seed_rows(per_category: int, seed: int = 0) -> list[dict[str, str]]:
    return [{"id": f"{category}-{index}", "problem": problem, "answer": true_answer(problem), "category": category}
            for category in OPERATIONS for index, problem in enumerate(problems(category, per_category, seed))]


def stated(answer: str, sample: int) -> str:
    """An answer as a model writes it: every other sample in title case without hyphens ("Twenty Four")."""
    return answer.replace("-", " ").title() if sample % 2 else answer


@register_reward("shorter_is_better")
def shorter_is_better(batch: RewardBatch) -> list[float]:
    """A tiny reward for the tests: one point for a right answer, less a point per 100 characters."""
    return [(verdict is True) - len(text) / 100 for text, verdict in zip(batch.completions, batch.verdicts,
                                                                          strict=True)]


class RuleEngine(Engine):
    """A test world's rule-based engine: sample k of each request is `answer(request, k)`."""

    honours_n = True

    def __init__(self, cfg: Any) -> None:
        self.model = cfg.model

    def generate(self, requests: list[Request]) -> list[list[Completion]]:
        return [[Completion(self.answer(request, index)) for index in range(request.n)] for request in requests]

    def answer(self, request: Request, index: int) -> str:
        raise NotImplementedError


class WordEngine(RuleEngine):
    """Plays every role from the world's rules, ending its answers with `Result: <words>`. Sample k of a request
    with seed s is the (s + k)-th sample: the same whether asked as one request for n or as n one-sample requests
    with seeds s, s + 1, ... As model `student` (the policy) about every other sample is off by one; as model
    `shouting` (an auditor, say) it writes its answers in capitals."""

    name = NAME

    def answer(self, request: Request, index: int) -> str:
        fields = request.fields
        if request.task == "extract":
            return json.dumps(CONCEPTS[fields["category"]][:fields["k"]])
        if request.task == "generate":
            problem = problem_text(fields["category"], *operands(
                fields["category"], draw(fields["concepts"], fields["level"], fields.get("instance", 0))))
            return f"A {fields['level']} one.\n\n### Problem\n{problem}\n"
        if request.task == "rate":
            return "Analysis: one sum of two number words, one answer in words.\nVerdict: perfect"
        answer = true_answer(fields["problem"])
        if answer is None:
            return "That is no sum of number words."
        sample = (request.seed or 0) + index
        if self.model == "student" and draw(fields["problem"], sample) % 2:
            answer = NUMBER_WORDS[(NUMBER_WORDS.index(answer) + 1) % len(NUMBER_WORDS)]
        return f"Adding word by word.\nResult: {answer.upper() if self.model == 'shouting' else stated(answer, sample)}"


class WordSumsWorld(World):
    name = NAME
    verifier = WordVerifier()
    prompt_dir = Path(__file__).parent / "word_world_prompts"
    default_roles = {**{role: RULES for role in ("extractor", "generator", "labeler")}, "judges": [RULES]}
    engines = {NAME: WordEngine}
    categories = tuple(OPERATIONS)

    def policy_prompt(self, problem: str) -> dict[str, Any]:
        return {"prompt": f"{problem}\n"}

    def heldout_set(self, name: str, cfg: Any, seed_problems: pl.DataFrame,
                    exclude: set[str] = frozenset()) -> pl.DataFrame | None:
        """`wordsums`: up to four problems per category that are neither seed nor training problems."""
        if name != NAME:
            return None
        taken = set(exclude) | {problem_key(text) for text in seed_problems["problem"]}
        rows = []
        for category in OPERATIONS:
            fresh = [text for text in dict.fromkeys(problems(category, 40, cfg.seed + HELDOUT_SEED))
                     if problem_key(text) not in taken][:4]
            rows += [{"problem_id": f"heldout-{category}-{index}", "problem": text, "answer": true_answer(text),
                      "category": category} for index, text in enumerate(fresh)]
        return pl.DataFrame(rows, schema=PROBLEM_SET_SCHEMA)


WORLD = register_world(WordSumsWorld())
