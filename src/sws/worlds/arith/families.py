"""Problem families of the arith world: six categories, three levels, concept tags, seeded generation.

A family is a recipe for expressions with a shape and features (digit counts, carries, borrows, parentheses);
each problem's concepts are derived from its expression by `truth.concepts_of`, and a family's `concepts` are
the tags every problem it makes is guaranteed to carry (the oracle's easier / harder problems pick families by
them; its other problems are built by `construct`).
Problem text is short canonical English the tiny policy reads: `Compute 47+85.`, `Compute 47 mod 5.`.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from sws.errors import UserError
from sws.near_duplicates import problem_key
from sws.worlds.arith import concepts as c
from sws.worlds.arith.expressions import BinOp, Node, Num, evaluate, has_borrow, has_carry, render
from sws.worlds.arith.truth import concepts_of

CATEGORIES = ("addition", "subtraction", "multiplication", "remainders", "precedence", "multi_step")
LEVELS = ("easy", "medium", "hard")


@dataclass(frozen=True)
class ArithProblem:
    problem: str
    answer: str
    category: str
    family: str
    level: str
    concepts: list[str]


@dataclass(frozen=True)
class Family:
    name: str
    category: str
    level: str
    concepts: tuple[str, ...]
    sample: Callable[[random.Random], Node]


def problem_text(expression: Node) -> str:
    return f"Compute {render(expression)}."


def expression_text(problem: ArithProblem) -> str:
    """The expression a problem's text asks for: `Compute 47+85.` → `47+85`."""
    return problem.problem.removeprefix("Compute ").rstrip(".")


def _pair(op: str, a: int, b: int, parenthesized: bool = False) -> BinOp:
    return BinOp(op, Num(a), Num(b), parenthesized)


def _until(draw: Callable[[], tuple[int, int]], accept: Callable[[int, int], bool]) -> tuple[int, int]:
    while True:
        a, b = draw()
        if accept(a, b):
            return a, b


def _chain(numbers: list[int], ops: list[str]) -> Node:
    node: Node = Num(numbers[0])
    for op, number in zip(ops, numbers[1:], strict=True):
        node = BinOp(op, node, Num(number))
    return node


def _mixed_chain(rng: random.Random, n_terms: int, low: int, high: int) -> Node:
    """A left-to-right chain of + and - (both present) whose running total never goes negative."""
    while True:
        ops = [rng.choice("+-") for _ in range(n_terms - 1)]
        if "+" not in ops or "-" not in ops:
            continue
        numbers = [rng.randint(low, high) for _ in range(n_terms)]
        total, ok = numbers[0], True
        for op, number in zip(ops, numbers[1:], strict=True):
            total = total + number if op == "+" else total - number
            ok = ok and total >= 0
        if ok:
            return _chain(numbers, ops)


def _swap(rng: random.Random, a: int, b: int) -> tuple[int, int]:
    return (a, b) if rng.random() < 0.5 else (b, a)


# ---------------------------------------------------------------- samplers, one per family


def _add_one_digit(rng: random.Random) -> Node:
    return _pair("+", rng.randint(1, 9), rng.randint(1, 9))


def _add_teen_and_digit(rng: random.Random) -> Node:
    return _pair("+", *_swap(rng, rng.randint(10, 19), rng.randint(1, 9)))


def _add_no_carry(rng: random.Random) -> Node:
    a, b = _until(lambda: (rng.randint(10, 89), rng.randint(10, 89)), lambda a, b: not has_carry(a, b))
    return _pair("+", a, b)


def _add_carry(rng: random.Random) -> Node:
    a, b = _until(lambda: (rng.randint(10, 99), rng.randint(10, 99)), has_carry)
    return _pair("+", a, b)


def _add_carry_small(rng: random.Random) -> Node:
    a, b = _until(lambda: (rng.randint(11, 89), rng.randint(2, 9)), has_carry)
    return _pair("+", *_swap(rng, a, b))


def _add_three_terms(rng: random.Random) -> Node:
    return _chain([rng.randint(1, 9) for _ in range(3)], ["+", "+"])


def _sub_one_digit(rng: random.Random) -> Node:
    a, b = _until(lambda: (rng.randint(2, 9), rng.randint(1, 9)), lambda a, b: a >= b)
    return _pair("-", a, b)


def _sub_within_twenty(rng: random.Random) -> Node:
    a, b = _until(lambda: (rng.randint(11, 18), rng.randint(2, 9)), lambda a, b: a - b <= 9)
    return _pair("-", a, b)


def _sub_small(rng: random.Random) -> Node:
    a, b = _until(lambda: (rng.randint(10, 29), rng.randint(1, 9)), lambda a, b: not has_borrow(a, b))
    return _pair("-", a, b)


def _sub_two_digit(rng: random.Random) -> Node:
    a, b = _until(lambda: (rng.randint(20, 99), rng.randint(10, 89)),
                  lambda a, b: a > b and not has_borrow(a, b))
    return _pair("-", a, b)


def _sub_borrow(rng: random.Random) -> Node:
    a, b = _until(lambda: (rng.randint(20, 99), rng.randint(10, 89)), lambda a, b: a > b and has_borrow(a, b))
    return _pair("-", a, b)


def _sub_borrow_small(rng: random.Random) -> Node:
    a, b = _until(lambda: (rng.randint(21, 99), rng.randint(2, 9)), has_borrow)
    return _pair("-", a, b)


def _mul_small(rng: random.Random) -> Node:
    return _pair("*", *_swap(rng, rng.randint(2, 5), rng.randint(2, 9)))


def _mul_table(rng: random.Random) -> Node:
    a, b = _until(lambda: (rng.randint(2, 9), rng.randint(2, 9)), lambda a, b: max(a, b) >= 6)
    return _pair("*", a, b)


def _mul_tens(rng: random.Random) -> Node:
    return _pair("*", *_swap(rng, 10 * rng.randint(1, 5), rng.randint(2, 9)))


def _mul_by_digit(rng: random.Random) -> Node:
    a, b = _until(lambda: (rng.randint(11, 29), rng.randint(2, 9)), lambda a, b: a % 10 != 0)
    return _pair("*", *_swap(rng, a, b))


def _mod_small(rng: random.Random) -> Node:
    divisor = rng.randint(2, 5)
    return _pair("mod", rng.randint(divisor + 1, 20), divisor)


def _mod_two_digit(rng: random.Random) -> Node:
    return _pair("mod", rng.randint(21, 50), rng.randint(3, 9))


def _mod_divisible(rng: random.Random) -> Node:
    divisor = rng.randint(2, 9)
    return _pair("mod", divisor * rng.randint(3, 11), divisor)


def _mod_large(rng: random.Random) -> Node:
    return _pair("mod", rng.randint(100, 999), rng.randint(3, 12))


def _prec_add_mul(rng: random.Random) -> Node:
    product = _pair("*", *_swap(rng, rng.randint(2, 3), rng.randint(2, 5)))
    addend = Num(rng.randint(1, 5))
    return BinOp("+", addend, product) if rng.random() < 0.5 else BinOp("+", product, addend)


def _prec_sub_mul(rng: random.Random) -> Node:
    b, c_ = rng.randint(2, 9), rng.randint(2, 9)
    product = _pair("*", b, c_)
    if rng.random() < 0.5:
        return BinOp("-", Num(rng.randint(b * c_, b * c_ + 30)), product)
    return BinOp("-", product, Num(rng.randint(1, min(9, b * c_))))


def _prec_parens(rng: random.Random) -> Node:
    a, b = rng.randint(1, 9), rng.randint(1, 9)
    inner = _pair(rng.choice("+-"), max(a, b), min(a, b), parenthesized=True)
    factor = Num(rng.randint(2, 9))
    return BinOp("*", inner, factor) if rng.random() < 0.5 else BinOp("*", factor, inner)


def _prec_two_products(rng: random.Random) -> Node:
    left = _pair("*", rng.randint(2, 9), rng.randint(2, 9))
    return BinOp("+", left, _pair("*", rng.randint(2, 9), rng.randint(2, 9)))


def _prec_two_digit(rng: random.Random) -> Node:
    return BinOp("+", Num(rng.randint(10, 99)), _pair("*", rng.randint(2, 9), rng.randint(2, 9)))


def _chain_three(rng: random.Random) -> Node:
    return _mixed_chain(rng, 3, 1, 6)


def _chain_four(rng: random.Random) -> Node:
    return _mixed_chain(rng, 4, 1, 12)


def _chain_parens(rng: random.Random) -> Node:
    inner = _pair("+", rng.randint(1, 9), rng.randint(1, 9), parenthesized=True)
    return BinOp("-", Num(rng.randint(inner.left.value + inner.right.value, 40)), inner)


def _chain_five(rng: random.Random) -> Node:
    return _mixed_chain(rng, 5, 1, 20)


_DIGITS_2 = (c.TWO_DIGIT, c.PLACE_VALUE)
FAMILIES: tuple[Family, ...] = (
    Family("add_one_digit", "addition", "easy", (c.ADDITION, c.ONE_DIGIT), _add_one_digit),
    Family("add_teen_and_digit", "addition", "medium", (c.ADDITION, *_DIGITS_2), _add_teen_and_digit),
    Family("add_no_carry", "addition", "medium", (c.ADDITION, *_DIGITS_2), _add_no_carry),
    Family("add_carry_small", "addition", "medium", (c.ADDITION, c.CARRYING, *_DIGITS_2), _add_carry_small),
    Family("add_carry", "addition", "hard", (c.ADDITION, c.CARRYING, *_DIGITS_2), _add_carry),
    Family("add_three_terms", "addition", "hard", (c.ADDITION, c.THREE_ADDENDS, c.ONE_DIGIT), _add_three_terms),
    Family("sub_one_digit", "subtraction", "easy", (c.SUBTRACTION, c.ONE_DIGIT), _sub_one_digit),
    Family("sub_within_twenty", "subtraction", "easy", (c.SUBTRACTION, c.BORROWING, c.TWO_DIGIT),
           _sub_within_twenty),
    Family("sub_small", "subtraction", "medium", (c.SUBTRACTION, *_DIGITS_2), _sub_small),
    Family("sub_two_digit", "subtraction", "medium", (c.SUBTRACTION, *_DIGITS_2), _sub_two_digit),
    Family("sub_borrow_small", "subtraction", "medium", (c.SUBTRACTION, c.BORROWING, *_DIGITS_2),
           _sub_borrow_small),
    Family("sub_borrow", "subtraction", "hard", (c.SUBTRACTION, c.BORROWING, *_DIGITS_2), _sub_borrow),
    Family("mul_small", "multiplication", "easy", (c.MULTIPLICATION, c.TIMES_TABLE, c.ONE_DIGIT), _mul_small),
    Family("mul_table", "multiplication", "medium", (c.MULTIPLICATION, c.TIMES_TABLE, c.ONE_DIGIT), _mul_table),
    Family("mul_tens", "multiplication", "medium", (c.MULTIPLICATION, c.MULTIPLES_OF_TEN, c.BY_ONE_DIGIT,
           *_DIGITS_2), _mul_tens),
    Family("mul_by_digit", "multiplication", "hard", (c.MULTIPLICATION, c.BY_ONE_DIGIT, *_DIGITS_2),
           _mul_by_digit),
    Family("mod_small", "remainders", "easy", (c.DIVISION, c.REMAINDER, c.TIMES_TABLE), _mod_small),
    Family("mod_two_digit", "remainders", "medium", (c.DIVISION, c.REMAINDER, c.TIMES_TABLE, c.TWO_DIGIT),
           _mod_two_digit),
    Family("mod_divisible", "remainders", "medium", (c.DIVISION, c.REMAINDER, c.DIVISIBILITY, c.TIMES_TABLE),
           _mod_divisible),
    Family("mod_large", "remainders", "hard", (c.DIVISION, c.REMAINDER, c.LONG_DIVISION, c.THREE_DIGIT),
           _mod_large),
    Family("prec_add_mul", "precedence", "easy", (c.ORDER_OF_OPERATIONS, c.MIXED_OPERATIONS, c.MULTIPLICATION,
           c.ADDITION), _prec_add_mul),
    Family("prec_sub_mul", "precedence", "medium", (c.ORDER_OF_OPERATIONS, c.MIXED_OPERATIONS, c.MULTIPLICATION,
           c.SUBTRACTION), _prec_sub_mul),
    Family("prec_parens", "precedence", "medium", (c.ORDER_OF_OPERATIONS, c.PARENTHESES, c.MULTIPLICATION),
           _prec_parens),
    Family("prec_two_products", "precedence", "hard", (c.ORDER_OF_OPERATIONS, c.MIXED_OPERATIONS,
           c.MULTIPLICATION, c.ADDITION), _prec_two_products),
    Family("prec_two_digit", "precedence", "hard", (c.ORDER_OF_OPERATIONS, c.MIXED_OPERATIONS, c.MULTIPLICATION,
           c.ADDITION, c.TWO_DIGIT), _prec_two_digit),
    Family("chain_three", "multi_step", "easy", (c.MULTI_STEP, c.LEFT_TO_RIGHT, c.ADDITION, c.SUBTRACTION),
           _chain_three),
    Family("chain_four", "multi_step", "medium", (c.MULTI_STEP, c.LEFT_TO_RIGHT, c.RUNNING_TOTAL, c.ADDITION,
           c.SUBTRACTION), _chain_four),
    Family("chain_parens", "multi_step", "medium", (c.MULTI_STEP, c.PARENTHESES, c.SUBTRACTION, c.ADDITION),
           _chain_parens),
    Family("chain_five", "multi_step", "hard", (c.MULTI_STEP, c.LEFT_TO_RIGHT, c.RUNNING_TOTAL, c.ADDITION,
           c.SUBTRACTION), _chain_five),
)
FAMILY_BY_NAME = {family.name: family for family in FAMILIES}


def category_concepts(category: str) -> list[str]:
    """Every concept tag the families of `category` carry, most common first."""
    counts: dict[str, int] = {}
    for family in FAMILIES:
        if family.category == category:
            for concept in family.concepts:
                counts[concept] = counts.get(concept, 0) + 1
    return sorted(counts, key=lambda concept: (-counts[concept], concept))


def families_of(category: str, level: str | None = None) -> list[Family]:
    return [f for f in FAMILIES if f.category == category and (level is None or f.level == level)]


def sample_problem(family: Family, rng: random.Random) -> ArithProblem:
    expression = family.sample(rng)
    text = problem_text(expression)
    return ArithProblem(
        problem=text, answer=str(evaluate(expression)), category=family.category, family=family.name,
        level=family.level, concepts=concepts_of(expression, family.category),
    )


def _checked(names: list[str] | None, allowed: tuple[str, ...], what: str) -> tuple[str, ...]:
    if names is None:
        return allowed
    for name in names:
        if name not in allowed:
            raise UserError(f"unknown arith {what} '{name}'; choose from {', '.join(allowed)}")
    if not names:
        raise UserError(f"empty list of arith {what}s; name at least one of {', '.join(allowed)}")
    return tuple(names)


def generate_problems(
    n: int, seed: int, categories: list[str] | None = None, levels: list[str] | None = None
) -> list[ArithProblem]:
    """`n` problems from `seed`: categories in turn, levels mixed evenly within each, repeats (commuted twins
    too, by `problem_key`) avoided."""
    chosen_categories = _checked(categories, CATEGORIES, "category")
    chosen_levels = _checked(levels, LEVELS, "level")
    rng = random.Random(seed)
    problems: list[ArithProblem] = []
    seen: set[str] = set()
    for index in range(n):
        category = chosen_categories[index % len(chosen_categories)]
        level = chosen_levels[(index // len(chosen_categories)) % len(chosen_levels)]
        # Small families (the times table) run out of new problems; after a few tries a repeat is allowed.
        for _ in range(200):
            problem = sample_problem(rng.choice(families_of(category, level)), rng)
            if problem_key(problem.problem) not in seen:
                break
        seen.add(problem_key(problem.problem))
        problems.append(problem)
    return problems
