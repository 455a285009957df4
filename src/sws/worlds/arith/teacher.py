"""What the arith world's rule-based teacher writes for each role, in the formats real models use.

Each function takes the prompt template's input fields and a seeded `random.Random` and returns the text a
teacher model would have produced: a concept list, a problem under `### Problem`, an assessment ending in a
`Verdict:` line, or step-by-step work ending in `\\boxed{}`. Noise (defective problems, wrong verdicts, wrong
answers) is injected here at the rates given; the engine wrapper lives in `sws.worlds.arith.oracle`.
The failures real small instruct models show are reproduced here too: a generation that runs past its problem
into a worked solution (`run_on_text`, with a wrong answer half the time), a rubber-stamp verdict without any
analysis (`RUBBER_STAMP`), and a labeler that copies an answer the problem text already gives.
"""

from __future__ import annotations

import json
import random
import re

from sws.worlds.arith.concepts import VOCABULARY
from sws.worlds.arith.construct import construct, normalized
from sws.worlds.arith.defects import inject_defect, near_miss
from sws.worlds.arith.expressions import Node, Num, evaluate, render
from sws.worlds.arith.families import (
    CATEGORIES,
    FAMILIES,
    LEVELS,
    ArithProblem,
    Family,
    category_concepts,
    families_of,
    problem_text,
    sample_problem,
)
from sws.worlds.arith.truth import DEFECT_KINDS, find_expression, solve

_DEFECT_REASONS = {
    "ill_posed": "It depends on a quantity that is never given, so it has no single answer.",
    "multi_part": "It asks for more than one result, so it has no single final answer.",
    "multiple_choice": "It is a multiple-choice question rather than an open computation.",
    "proof": "It asks for a proof, which has no numeric answer to check.",
    "true_false": "It is a true/false question, which a guess answers half the time.",
    "answer_leak": "The statement gives away its own answer.",
}


# ---------------------------------------------------------------- extract


def noisy_concepts(concepts: list[str], concept_error: float, rng: random.Random) -> list[str]:
    """`concepts` with each one, at rate `concept_error`, dropped or (as often) swapped for a concept of the
    world's vocabulary the problem does not show; never an empty list (a lone dropped concept is swapped instead)."""
    wrong = [concept for concept in VOCABULARY if concept not in concepts]
    listed: list[str] = []
    for concept in concepts:
        if rng.random() >= concept_error:
            listed.append(concept)
        elif rng.random() < 0.5 or (concept == concepts[-1] and not listed):
            listed.append(wrong.pop(rng.randrange(len(wrong))))
    return listed


def extract_text(problem: str, k: int, rng: random.Random, concept_error: float = 0.0,
                 noise: random.Random | None = None) -> str:
    """A list of at most `k` foundational concepts: those the problem's structure shows (`truth.concepts_of`:
    carries, borrows, digit counts, operation mix, ...), never padded with its category's other concepts; each
    is missing or wrong at rate `concept_error`, drawn from the `noise` stream."""
    concepts = list(solve(problem).concepts)
    rng.shuffle(concepts)
    if concept_error > 0 and concepts:
        concepts = noisy_concepts(concepts, concept_error, noise or rng)
    concepts = concepts[:k]
    preamble = rng.choice(["", "", "Here are the foundational concepts this problem relies on:\n\n",
                           "The key concepts are:\n"])
    style = rng.choice(["json", "numbered", "bulleted"])
    if style == "json":
        body = json.dumps(concepts)
    elif style == "numbered":
        body = "\n".join(f"{index}. {concept}" for index, concept in enumerate(concepts, start=1))
    else:
        bullet = rng.choice(["-", "*"])
        body = "\n".join(f"{bullet} {concept}" for concept in concepts)
    return preamble + body


# ---------------------------------------------------------------- generate


def choose_family(category: str, concepts: list[str], level: str, rng: random.Random) -> Family:
    """The family of `category` covering most of the requested concepts; the requested level breaks ties."""
    candidates = families_of(category) if category in CATEGORIES else list(FAMILIES)
    wanted = {normalized(concept) for concept in concepts}

    def score(family: Family) -> float:
        return len(wanted & set(family.concepts)) + 0.5 * (family.level == level)

    best_score = max(score(family) for family in candidates)
    return rng.choice([family for family in candidates if score(family) == best_score])


# Draws of the source's family among which an adapted problem with smaller (larger) numbers is chosen.
NUMBER_DRAWS = 16


def source_family(category: str, carried: set[str], level: str) -> Family | None:
    """The family a problem carrying the concepts `carried` most likely came from: among the families of
    `category` whose concepts it all carries, one of the requested level first, then the most specific."""
    matching = [family for family in families_of(category) if set(family.concepts) <= carried]
    return max(matching, key=lambda family: (family.level == level, len(family.concepts)), default=None)


def number_size(problem: ArithProblem) -> int:
    return sum(int(number) for number in re.findall(r"\d+", problem.problem))


def adapted_problem(
    category: str, concepts: list[str], level: str, direction: str, source_problem: str, rng: random.Random
) -> tuple[Family, ArithProblem]:
    """An easier (harder) problem on the concepts of `source_problem`, as a teacher asked for one writes it: a
    family of the next lower (higher) level that keeps the source's most specific concept (the one the fewest
    families of the category carry) when there is one, else the source's family (failing that, the family
    covering most requested concepts) with smaller (larger) numbers."""
    carried = set(solve(source_problem).concepts) & set(category_concepts(category))
    source = source_family(category, carried, level) or choose_family(category, concepts, level, rng)
    holders = {concept: sum(concept in family.concepts for family in families_of(category)) for concept in carried}
    specific = min(sorted(holders), key=holders.__getitem__, default=None)
    rank = LEVELS.index
    easier = direction == "easier"
    others = [family for family in families_of(category) if specific in family.concepts
              and (rank(family.level) < rank(source.level) if easier else rank(family.level) > rank(source.level))]
    if others:
        closest = (max if easier else min)(rank(family.level) for family in others)
        family = rng.choice([family for family in others if rank(family.level) == closest])
        return family, sample_problem(family, rng)
    draws = [sample_problem(source, rng) for _ in range(NUMBER_DRAWS)]
    return source, (min if easier else max)(draws, key=number_size)


def generate_text(
    category: str, concepts: list[str], level: str, rates: dict[str, float], rng: random.Random,
    run_on: random.Random | None = None, adapt: tuple[str, str] | None = None,
) -> str:
    """Some planning, then one problem under `### Problem`; at most one defect, drawn at the given rates.
    The problem is built to show as many requested concepts as one problem can (`construct`); the plan names
    the unknown ones it ignores and the known ones it left out, and a set it can mostly not show gets a refusal
    without a problem.
    With a `run_on` random stream, a worked solution follows the problem (`run_on_text`). Each variant of a
    request (its `instance` field) draws from a stream of its own (the engine keys `rng` by the fields), as a
    model asked for another variant writes another problem. `adapt` (direction, source problem) asks for an
    easier or harder problem than the source (`adapted_problem`)."""
    topic = category.replace("_", " ")
    plan = f"I need a {level} {topic} problem built on: {', '.join(concepts) or 'basic arithmetic'}.\n"
    if adapt is None:
        built = construct(category, concepts, level, rng)
        if built.ignored:
            plan += f"I leave out {', '.join(built.ignored)}: no concept of arithmetic I know.\n"
        if built.left_out and built.expression is not None:
            plan += (f"I leave out {', '.join(built.left_out)}: "
                     f"no {topic} problem I can write shows them with the rest.\n")
        if built.expression is None:
            return plan + f"\nI cannot build such a problem: {built.refusal}.\n"
        text = problem_text(built.expression)
        truth = solve(text)
        problem = ArithProblem(text, truth.answer, category, "constructed", level, truth.concepts)
        wanted = {normalized(concept) for concept in concepts}
        used = [concept for concept in truth.concepts if concept in wanted]
    else:
        family, problem = adapted_problem(category, concepts, level, *adapt, rng)
        used = list(family.concepts)
    text = problem.problem
    roll, threshold = rng.random(), 0.0
    for kind in DEFECT_KINDS:
        threshold += rates.get(kind, 0.0)
        if roll < threshold:
            text = inject_defect(kind, problem, rng)
            break
    plan += f"I will use {', '.join(used) or topic}, with numbers chosen to keep the answer a single integer.\n"
    header = rng.choices(["### Problem\n{}", "**Problem:** {}", "### Problem\n```\n{}\n```"], [0.85, 0.1, 0.05])[0]
    solution = run_on_text(text, run_on) if run_on is not None else ""
    return plan + "\n" + header.format(text) + "\n" + solution


# How real instruct models go on after the problem they were asked for (recorded from Qwen2.5-Coder-1.5B).
_RUN_ON_FORMS = (
    "\n---\n\nTo solve this problem, we work through the operations one at a time.\n\n{steps}\n\n"
    "Therefore, the answer is:\n\\[\n\\boxed{{{answer}}}\n\\]\n",
    "\n### Solution\nTo solve this problem, we need to follow these steps:\n\n{steps}\n\n"
    "So, the final answer is \\(\\boxed{{{answer}}}\\).\n",
    "\n**Analysis:** {steps} Thus the result is {answer}.\n",
)


def run_on_text(problem: str, rng: random.Random) -> str:
    """A worked solution written after the problem, as a generator that does not stop would add; its answer
    is wrong half the time (a problem may then carry a wrong solution that a labeler copies). '' when the
    problem has no single answer."""
    truth, expression = solve(problem), find_expression(problem)
    if truth.answer is None or expression is None or not truth.answer.lstrip("-").isdigit():
        return ""
    answer = truth.answer if rng.random() < 0.5 else str(near_miss(int(truth.answer), rng))
    steps = _worked_steps(expression)
    steps[-1] = f"{steps[-1].rsplit(' ', 1)[0]} {answer}."
    listed = "\n".join(f"{index}. {step}" for index, step in enumerate(steps, start=1))
    return rng.choice(_RUN_ON_FORMS).format(steps=listed, answer=answer)


# ---------------------------------------------------------------- rate


RUBBER_STAMP = "Verdict: perfect"


def rate_text(problem: str, judge_error: float, rng: random.Random) -> str:
    """An analysis of the requirements ending in `Verdict: perfect|acceptable|bad`, wrong at rate `judge_error`."""
    truth = solve(problem)
    wrong = rng.random() < judge_error
    if (truth.kind == "ok") != wrong:
        verdict = "perfect" if rng.random() < 0.85 else "acceptable"
        reason = "The problem is clear, self-contained and has a single integer answer."
        if verdict == "acceptable":
            reason += " The wording is terse but understandable."
    else:
        verdict = "bad"
        reason = _DEFECT_REASONS.get(truth.kind, "The wording is ambiguous and the answer is unclear.")
    return f"Analysis: I checked each requirement in turn. {reason}\nVerdict: {verdict}"


# ---------------------------------------------------------------- label


def _worked_steps(expression: Node) -> list[str]:
    """One line per operation, innermost first, with the values already computed substituted in."""
    if isinstance(expression, Num):
        return []
    steps = [*_worked_steps(expression.left), *_worked_steps(expression.right)]
    left, right, value = evaluate(expression.left), evaluate(expression.right), evaluate(expression)
    if expression.op == "mod":
        steps.append(f"{left} = {right}*{left // right} + {value}, so the remainder is {value}.")
    else:
        steps.append(f"{left}{expression.op}{right} = {value}.")
    return steps


_GIVEN_ANSWER = re.compile(r"\\boxed\{(-?\d+)\}|(?:answer|result) is:?\s*(-?\d+)", re.I)


def label_text(problem: str, labeler_error: float, rng: random.Random) -> str:
    """Step-by-step work ending in `\\boxed{answer}`; the answer is a near miss at rate `labeler_error`.

    Like small real models, it copies an answer the problem text already gives, right or wrong.
    """
    given = _GIVEN_ANSWER.findall(problem)
    if given:
        answer = next(part for part in given[-1] if part)
        return f"The solution above already works it out.\nThe final answer is \\boxed{{{answer}}}."
    truth = solve(problem)
    expression = find_expression(problem)
    if truth.answer is None or expression is None:
        if rng.random() < 0.5:
            return "The problem does not determine a single value, so I cannot give a final answer."
        return f"Guessing from the numbers given, the answer is \\boxed{{{rng.randint(0, 100)}}}."
    wrong = rng.random() < labeler_error
    if truth.kind == "true_false":
        answer = str(truth.answer != "True") if wrong else truth.answer
        steps = [f"{render(expression)} = {evaluate(expression)}, so the statement is {answer.lower()}."]
    else:
        answer = str(near_miss(int(truth.answer), rng)) if wrong else truth.answer
        steps = _worked_steps(expression)
        steps[-1] = f"{steps[-1].rsplit(' ', 1)[0]} {answer}."
    work = "\n".join(f"Step {index}: {step}" for index, step in enumerate(steps, start=1))
    return f"Let me work through it.\n{work}\nThe final answer is \\boxed{{{answer}}}."


# ---------------------------------------------------------------- categorize


def categorize_text(problem: str, categories: list[str], categorizer_error: float, rng: random.Random) -> str:
    """A one-sentence summary, then the problem's domain from `categories` and the end marker; a wrong domain of
    the list at rate `categorizer_error`, and one drawn at random when the problem's category is not listed."""
    truth = solve(problem)
    wrong = rng.random() < categorizer_error and len(categories) > 1
    if truth.category in categories and not wrong:
        domain = truth.category
    else:
        domain = rng.choice([category for category in categories if category != truth.category] or categories)
    skill = truth.concepts[0] if truth.concepts else "careful reading"
    preamble = rng.choice(["", "", "Let me look at what the problem asks.\n"])
    return (f"{preamble}Summary: The problem asks for the value of an arithmetic expression, which takes {skill}.\n"
            f"Domain: {domain}\nEND OF LABEL")
