"""One spelling for arithmetic that differs only in the order of commuted operands: `8+47` and `47+8`, `3*12`
and `12*3`, `2+5*3` and `3*5+2` are one problem for the duplicate key (`sws.near_duplicates.problem_key`) and
content ids.

Only a standalone run of integers, `+ - *`, parentheses and spaces is rewritten (no letter, decimal point, `^`, `/`, `!`
or `%` touching it), so `x-3+4`, `2^3+4` and `10/2+5` keep their text. Operands of a chain of one commutative
operator (`1+2+3`, not crossing parentheses) are sorted; `-` keeps its order. A run that does not parse is kept.
"""

from __future__ import annotations

import re

_RUN = re.compile(r"(?<![\w.^/!%+\-*()])[\d(][\d+\-*() ]*(?<=[\d)])(?![\w^/!%+\-*()]|\.\d)")
_TOKEN = re.compile(r"\d+|[+\-*()]")
COMMUTATIVE = ("+", "*")


class _Unparsed(ValueError):
    pass


def _parse(tokens: list[str]) -> tuple[str, list]:
    """A tree of `(op, operands)` tuples and integer strings: `-` binary left-assoc, `+`/`*` flattened."""
    position = 0

    def peek() -> str | None:
        return tokens[position] if position < len(tokens) else None

    def take() -> str:
        nonlocal position
        if position >= len(tokens):
            raise _Unparsed
        position += 1
        return tokens[position - 1]

    def level(operators: tuple[str, ...], operand) -> object:
        tree = operand()
        while peek() in operators:
            op = take()
            right = operand()
            if op in COMMUTATIVE and isinstance(tree, tuple) and tree[0] == op and not tree[2]:
                tree = (op, [*tree[1], right], False)
            else:
                tree = (op, [tree, right], False)
        return tree

    def atom() -> object:
        token = take()
        if token.isdigit():
            return str(int(token))
        if token != "(":
            raise _Unparsed
        inner = level(("+", "-"), lambda: level(("*",), atom))
        if take() != ")":
            raise _Unparsed
        return (inner[0], inner[1], True) if isinstance(inner, tuple) else inner

    tree = level(("+", "-"), lambda: level(("*",), atom))
    if position != len(tokens):
        raise _Unparsed
    return tree


def _render(tree: object) -> str:
    if isinstance(tree, str):
        return tree
    op, operands, parenthesized = tree
    parts = [_render(operand) for operand in operands]
    if op in COMMUTATIVE:
        parts.sort()
    # Without its own parentheses a node's operands bind tighter than it does (or are a `-` chain of a sum),
    # so the reordered text still has the original's value.
    joined = op.join(parts)
    return f"({joined})" if parenthesized else joined


def _canonical_run(match: re.Match[str]) -> str:
    run = match.group(0)
    if not any(op in run for op in COMMUTATIVE):
        return run
    try:
        return _render(_parse(_TOKEN.findall(run)))
    except _Unparsed:
        return run


def commuted_key(text: str) -> str:
    """`text` with each standalone arithmetic run (spaces inside it allowed) in one canonical spelling, written
    without spaces (see the module docstring)."""
    return _RUN.sub(_canonical_run, text)
