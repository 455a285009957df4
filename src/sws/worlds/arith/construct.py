"""The oracle generator's search for a problem that shows a requested set of concepts.

It draws expressions of its own shapes for the requested category (operand and term counts, digit counts set
by the level, parentheses), never from the families' samplers (which the held-out sets draw from), and keeps the
one whose `truth.concepts_of` shows the most requested concepts the vocabulary knows (the first that shows all of
them ends the search). As a model asked for concepts that cannot meet in one problem would, it writes the nearest
problem and names what it left out; it refuses only a set it can mostly not show (fewer than half of the known
concepts), with the reason.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

from sws.worlds.arith import concepts as c
from sws.worlds.arith.expressions import BinOp, Node, Num, evaluate, operations
from sws.worlds.arith.truth import category_of, concepts_of

# Draws at the requested level; a concept its digit counts cannot show (three-digit numbers at medium, say) is
# left out, never shown by a problem of another level.
DRAWS_PER_REQUEST = 2000
# Digit counts an operand of each level draws from; half the draws give all operands one of them.
LEVEL_DIGITS = {"easy": (1, 1, 1, 2), "medium": (1, 2, 2), "hard": (1, 2, 2, 3)}
# Seeded draws per category over which `category_vocabulary` collects the concepts its shapes can show.
VOCABULARY_DRAWS = 4000


@dataclass(frozen=True)
class Construction:
    """The expression built (None when refused), the requested concepts it ignored as unknown, the known ones
    it left out (no problem it found shows them with the rest), and why a refusal refused."""

    expression: Node | None
    ignored: list[str] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)
    refusal: str = ""


def _number(rng: random.Random, digits: int) -> int:
    """A number of `digits` digits, with a zero digit now and then (round numbers, 403)."""
    if digits == 1:
        return rng.randint(1, 9)
    value = rng.randint(10 ** (digits - 1), 10 ** digits - 1)
    roll = rng.random()
    if roll < 0.15:
        return value - value % 10
    if roll < 0.25 and digits == 3:
        return value - (value // 10 % 10) * 10
    return value


def _operand(rng: random.Random, digits: tuple[int, ...]) -> int:
    return _number(rng, rng.choice(digits))


def _factor(rng: random.Random, digits: tuple[int, ...]) -> int:
    """A factor of a product: mostly one-digit, so that products stay small."""
    return _operand(rng, digits) if rng.random() < 0.3 else rng.randint(2, 9)


def _ordered(rng: random.Random, digits: tuple[int, ...]) -> tuple[int, int]:
    a, b = _operand(rng, digits), _operand(rng, digits)
    return max(a, b), min(a, b)


def _addition(rng: random.Random, level: str, digits: tuple[int, ...]) -> Node:
    node: Node = Num(_operand(rng, digits))
    for _ in range(rng.choice((1, 1, 2))):
        node = BinOp("+", node, Num(_operand(rng, digits)))
    return node


def _subtraction(rng: random.Random, level: str, digits: tuple[int, ...]) -> Node:
    return BinOp("-", *map(Num, _ordered(rng, digits)))


def _multiplication(rng: random.Random, level: str, digits: tuple[int, ...]) -> Node:
    a = _operand(rng, digits)
    b = _number(rng, 2) if a < 100 and rng.random() < 0.3 else rng.randint(1, 9)
    return BinOp("*", *map(Num, (a, b) if rng.random() < 0.5 else (b, a)))


def _remainders(rng: random.Random, level: str, digits: tuple[int, ...]) -> Node:
    divisor = rng.randint(10, 12) if rng.random() < 0.15 else rng.randint(2, 9)
    return BinOp("mod", Num(_operand(rng, digits)), Num(divisor))


def _precedence(rng: random.Random, level: str, digits: tuple[int, ...]) -> Node:
    product = BinOp("*", Num(_factor(rng, digits)), Num(rng.randint(2, 9)))
    roll = rng.random()
    if roll < 0.3:
        other: Node = Num(_operand(rng, digits))
    elif roll < 0.5:
        other = BinOp("*", Num(rng.randint(2, 9)), Num(rng.randint(2, 9)))
    else:
        a, b = _ordered(rng, digits)
        inner = BinOp(rng.choice("+-"), Num(a), Num(b), parenthesized=True)
        product = BinOp("*", inner, Num(rng.randint(2, 9))) if rng.random() < 0.5 else \
            BinOp("*", Num(rng.randint(2, 9)), inner)
        if rng.random() < 0.6:
            return product
        other = Num(_operand(rng, digits))
    op = rng.choice("+-")
    return BinOp(op, product, other) if rng.random() < 0.5 else BinOp(op, other, product)


def _multi_step(rng: random.Random, level: str, digits: tuple[int, ...]) -> Node:
    """A chain of + and - of 3 to 5 terms, two neighbouring terms of it in parentheses now and then."""
    count = rng.choice({"easy": (3,), "medium": (3, 4), "hard": (4, 5)}[level])
    terms: list[Node] = [Num(_operand(rng, digits)) for _ in range(count)]
    ops = [rng.choice("+-") for _ in range(count - 1)]
    if rng.random() < 0.35:
        at = rng.randrange(1, count - 1)
        terms[at:at + 2] = [BinOp(ops.pop(at), terms[at], terms[at + 1], parenthesized=True)]
    node = terms[0]
    for op, term in zip(ops, terms[1:], strict=True):
        node = BinOp(op, node, term)
    return node


SHAPES: dict[str, Callable[[random.Random, str, tuple[int, ...]], Node]] = {
    "addition": _addition, "subtraction": _subtraction, "multiplication": _multiplication,
    "remainders": _remainders, "precedence": _precedence, "multi_step": _multi_step,
}


def _draw(category: str, level: str, rng: random.Random) -> Node | None:
    """One expression of the category's shapes, or None when it left the category or went below zero."""
    digits = LEVEL_DIGITS[level] if rng.random() < 0.5 else (rng.choice(LEVEL_DIGITS[level]),)
    expression = SHAPES[category](rng, level, digits)
    if category_of(expression) != category or any(evaluate(op) < 0 for op in operations(expression)):
        return None
    return expression


@cache
def category_vocabulary(category: str) -> frozenset[str]:
    """Every concept some expression of the category's shapes shows, over a fixed set of seeded draws."""
    rng = random.Random(f"vocabulary:{category}")
    shown: set[str] = set()
    for index in range(VOCABULARY_DRAWS):
        expression = _draw(category, tuple(LEVEL_DIGITS)[index % len(LEVEL_DIGITS)], rng)
        if expression is not None:
            shown.update(concepts_of(expression, category))
    return frozenset(shown)


def normalized(concept: str) -> str:
    return " ".join(concept.lower().split())


def construct(category: str, concepts: list[str], level: str, rng: random.Random) -> Construction:
    """The drawn expression of `category` showing the most requested concepts the vocabulary knows: up to
    DRAWS_PER_REQUEST draws at `level` (its operands' digit counts), until one shows every concept the category's
    shapes can show. Refused when the best shows fewer than half of the known concepts."""
    wanted = list(dict.fromkeys(normalized(concept) for concept in concepts))
    ignored = [concept for concept in wanted if concept not in c.VOCABULARY]
    known = [concept for concept in wanted if concept in c.VOCABULARY]
    topic = category.replace("_", " ")
    if category not in SHAPES:
        return Construction(None, ignored, known, f"the arith world has no category '{category}'")
    reachable = set(known) & category_vocabulary(category)
    if 2 * len(reachable) < len(known):
        foreign = [concept for concept in known if concept not in reachable]
        return Construction(None, ignored, known, f"no {topic} problem shows {', '.join(foreign)}")
    best: Node | None = None
    best_shown: set[str] = set()
    draw_level = level if level in LEVEL_DIGITS else "medium"
    for _ in range(DRAWS_PER_REQUEST):
        expression = _draw(category, draw_level, rng)
        if expression is None:
            continue
        shown = reachable & set(concepts_of(expression, category))
        if best is None or len(shown) > len(best_shown):
            best, best_shown = expression, shown
        if shown == reachable:
            break
    left_out = [concept for concept in known if concept not in best_shown]
    if best is None or 2 * len(best_shown) < len(known):
        return Construction(None, ignored, left_out, f"no {topic} problem I tried shows more than "
                                                     f"{len(best_shown)} of {', '.join(known)}")
    return Construction(best, ignored, left_out)
