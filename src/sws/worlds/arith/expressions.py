"""Arithmetic expressions of the arith world: a small parser and evaluator (never Python's eval).

Grammar: integers, `+ - *`, parentheses, and `a mod b` at the top level. A letter in place of a number parses
as an unknown, which makes the expression undetermined (an ill-posed problem).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z]+)|(.))")


class ExpressionError(ValueError):
    """The text is not an expression of the arith grammar."""


class Undetermined(ValueError):
    """The expression has no single integer value (an unknown, or a remainder modulo zero)."""


@dataclass(frozen=True)
class Num:
    value: int


@dataclass(frozen=True)
class Unknown:
    name: str


@dataclass(frozen=True)
class BinOp:
    op: str  # one of + - * mod
    left: Node
    right: Node
    parenthesized: bool = False


Node = Num | Unknown | BinOp


def _tokens(text: str) -> list[str]:
    tokens = []
    for number, word, symbol in _TOKEN.findall(text):
        token = number or word or symbol
        if token.strip():
            tokens.append(token)
    return tokens


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens = _tokens(text)
        self.position = 0

    def peek(self) -> str | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def take(self) -> str:
        token = self.peek()
        if token is None:
            raise ExpressionError("unexpected end of expression")
        self.position += 1
        return token

    def parse(self) -> Node:
        node = self.sum()
        if self.peek() == "mod":
            self.take()
            node = BinOp("mod", node, self.sum())
        if self.peek() is not None:
            raise ExpressionError(f"unexpected {self.peek()!r}")
        return node

    def sum(self) -> Node:
        node = self.product()
        while self.peek() in ("+", "-"):
            op = self.take()
            node = BinOp(op, node, self.product())
        return node

    def product(self) -> Node:
        node = self.atom()
        while self.peek() == "*":
            self.take()
            node = BinOp("*", node, self.atom())
        return node

    def atom(self) -> Node:
        token = self.take()
        if token.isdigit():
            return Num(int(token))
        if token.isalpha() and token != "mod":
            return Unknown(token)
        if token == "(":
            inner = self.sum()
            if self.take() != ")":
                raise ExpressionError("missing ')'")
            if isinstance(inner, BinOp):
                return BinOp(inner.op, inner.left, inner.right, parenthesized=True)
            return inner
        raise ExpressionError(f"unexpected {token!r}")


def parse(text: str) -> Node:
    """Parse an expression; raise ExpressionError if it is not one."""
    return _Parser(text).parse()


def evaluate(node: Node) -> int:
    """The integer value of an expression; raise Undetermined if it has none."""
    if isinstance(node, Num):
        return node.value
    if isinstance(node, Unknown):
        raise Undetermined(f"unknown quantity {node.name!r}")
    left, right = evaluate(node.left), evaluate(node.right)
    if node.op == "+":
        return left + right
    if node.op == "-":
        return left - right
    if node.op == "*":
        return left * right
    if right == 0:
        raise Undetermined("remainder modulo zero")
    return left % right


def render(node: Node) -> str:
    """Canonical text of an expression: no spaces around + - *, spaces around mod."""
    if isinstance(node, Num):
        return str(node.value)
    if isinstance(node, Unknown):
        return node.name
    separator = " mod " if node.op == "mod" else node.op
    text = f"{render(node.left)}{separator}{render(node.right)}"
    return f"({text})" if node.parenthesized else text


def evaluate_left_to_right(node: Node) -> int:
    """The value a solver gets who works through + - * strictly from left to right, inside parentheses too
    (3+4*5 → 35): what an expression's precedence can trap a solver into."""
    terms: list[Node] = []
    ops: list[str] = []

    def flatten(part: Node) -> None:
        if isinstance(part, BinOp) and part.op != "mod" and not part.parenthesized:
            flatten(part.left)
            ops.append(part.op)
            flatten(part.right)
        else:
            terms.append(part)

    if isinstance(node, BinOp) and node.op == "mod":
        return evaluate_left_to_right(node.left) % evaluate(node.right)
    flatten(node)
    values = [evaluate_left_to_right(BinOp(t.op, t.left, t.right)) if isinstance(t, BinOp) else evaluate(t)
              for t in terms]
    total = values[0]
    for op, value in zip(ops, values[1:], strict=True):
        total = evaluate(BinOp(op, Num(total), Num(value)))
    return total


def operations(node: Node) -> list[BinOp]:
    """Every operation of the expression, innermost first (the order a person evaluates them)."""
    if not isinstance(node, BinOp):
        return []
    return [*operations(node.left), *operations(node.right), node]


def numbers(node: Node) -> list[int]:
    if isinstance(node, Num):
        return [node.value]
    if isinstance(node, BinOp):
        return [*numbers(node.left), *numbers(node.right)]
    return []


def carry_columns(a: int, b: int) -> list[int]:
    """The columns (0: units) out of which column addition of a + b (a, b >= 0) carries."""
    columns, carry, column = [], 0, 0
    while a or b or carry:
        carry = int(a % 10 + b % 10 + carry >= 10)
        if carry:
            columns.append(column)
        a, b, column = a // 10, b // 10, column + 1
    return columns


def borrow_columns(a: int, b: int) -> list[tuple[int, bool]]:
    """Each column (0: units) that borrows in column subtraction of a - b (a >= b >= 0), with whether the digit
    it borrows from is a zero that must borrow in turn (403-158 borrows across the tens' zero)."""
    columns, borrow, column = [], 0, 0
    while b or (borrow and a):
        borrow = int(a % 10 - borrow < b % 10)
        if borrow:
            columns.append((column, (a // 10) % 10 == 0 and a >= 100))
        a, b, column = a // 10, b // 10, column + 1
    return columns


def has_carry(a: int, b: int) -> bool:
    """Whether column addition of a + b carries in some column."""
    return bool(carry_columns(a, b))


def has_borrow(a: int, b: int) -> bool:
    """Whether column subtraction of a - b (a >= b) borrows in some column."""
    return bool(borrow_columns(a, b))
