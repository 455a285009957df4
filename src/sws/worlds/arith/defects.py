"""The defects a noisy problem generator introduces, and plausible wrong answers.

Each defect kind has a few wordings; `truth.solve` recognises every one of them from the text alone.
"""

from __future__ import annotations

import random
import re

from sws.worlds.arith.families import ArithProblem, expression_text, families_of, sample_problem


def near_miss(value: int, rng: random.Random) -> int:
    """A wrong answer a careless solver could give: off by one or two, a lost carry, swapped digits."""
    candidates = {value + 1, value - 1, value + 2, value - 2, value + 10, value - 10}
    digits = str(abs(value))
    if len(digits) >= 2 and digits[-1] != digits[-2]:
        candidates.add(int(digits[:-2] + digits[-1] + digits[-2]) * (1 if value >= 0 else -1))
    allowed = sorted(c for c in candidates if c != value and (c >= 0 or value < 0))
    return rng.choice(allowed)


def _ill_posed(problem: ArithProblem, rng: random.Random) -> str:
    """An unknown in place of a number, a vague extra quantity, or a remainder modulo zero."""
    expression = expression_text(problem)
    roll = rng.random()
    if roll < 0.6:
        number = rng.choice(list(re.finditer(r"\d+", expression)))
        return f"Compute {expression[:number.start()]}{rng.choice('xnky')}{expression[number.end():]}."
    if roll < 0.8:
        return f"Compute {expression} plus some number."
    if problem.category == "remainders":
        return f"Compute {expression.split(' mod ')[0]} mod 0."
    return f"Compute ({expression}) mod 0."


def _multi_part(problem: ArithProblem, rng: random.Random) -> str:
    other = sample_problem(rng.choice(families_of(problem.category)), rng)
    first, second = expression_text(problem), expression_text(other)
    wordings = (
        f"Compute {first}. Then compute {second}.",
        f"(a) Compute {first}. (b) Compute {second}.",
        f"Compute {first} and {second}.",
    )
    return rng.choice(wordings)


def _multiple_choice(problem: ArithProblem, rng: random.Random) -> str:
    value = int(problem.answer)
    options = {value}
    while len(options) < 4:
        options.add(near_miss(value, rng))
    shuffled = sorted(options)
    rng.shuffle(shuffled)
    labeled = [f"({letter}) {option}" for letter, option in zip("ABCD", shuffled, strict=True)]
    wordings = (
        f"{problem.problem} Options: {' '.join(labeled)}",
        f"{problem.problem} Choose one: {', '.join(labeled)}.",
        f"{problem.problem} Choices: {' '.join(labeled)}",
    )
    return rng.choice(wordings)


def _proof(problem: ArithProblem, rng: random.Random) -> str:
    expression, value = expression_text(problem), int(problem.answer)
    wordings = (
        f"Prove that {expression} = {value}.",
        f"Show that {expression} is {'even' if value % 2 == 0 else 'odd'}.",
        f"Prove that {expression} is greater than {value - 1}.",
    )
    return rng.choice(wordings)


def _true_false(problem: ArithProblem, rng: random.Random) -> str:
    expression, value = expression_text(problem), int(problem.answer)
    claimed = value if rng.random() < 0.5 else near_miss(value, rng)
    wordings = (
        f"True or false: {expression} = {claimed}.",
        f"Is it true that {expression} = {claimed}?",
        f"True or false: {expression} is {rng.choice(['even', 'odd'])}.",
    )
    return rng.choice(wordings)


def _answer_leak(problem: ArithProblem, rng: random.Random) -> str:
    wordings = (
        f"{problem.problem} The answer is {problem.answer}.",
        f"{problem.problem} (Hint: the result is {problem.answer}.)",
        f"Compute {expression_text(problem)} = {problem.answer}.",
    )
    return rng.choice(wordings)


_INJECTORS = {
    "ill_posed": _ill_posed,
    "multi_part": _multi_part,
    "multiple_choice": _multiple_choice,
    "proof": _proof,
    "true_false": _true_false,
    "answer_leak": _answer_leak,
}


def inject_defect(kind: str, problem: ArithProblem, rng: random.Random) -> str:
    """The text of `problem` rewritten to carry exactly the defect `kind` (one of truth.DEFECT_KINDS)."""
    return _INJECTORS[kind](problem, rng)
