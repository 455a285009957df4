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


def has_carry(a: int, b: int) -> bool:
    """Whether column addition of a + b carries in some column."""
    while a and b:
        if a % 10 + b % 10 >= 10:
            return True
        a, b = a // 10, b // 10
    return False


def has_borrow(a: int, b: int) -> bool:
    """Whether column subtraction of a - b (a >= b) borrows in some column."""
    while b:
        if a % 10 < b % 10:
            return True
        a, b = a // 10, b // 10
    return False
