"""The column-arithmetic misconceptions the warm start teaches part of the time, as a real model's weakness.

A real model is weak on a skill when it applies a wrong procedure some of the time, not when it cannot compute
at all. The bootstrap answers a share of its carrying additions with the carry dropped (`47+8` → 45) and a
share of its borrowing subtractions with the smaller digit taken from the larger (`52-7` → 55). The policy then
solves such problems some of the time, so GRPO on them has a signal to repair the procedure with.
"""

from __future__ import annotations

from sws.worlds.arith.expressions import BinOp, Node, Num, has_borrow, has_carry


def dropped_carry(a: int, b: int) -> int:
    """Column addition that writes each column's last digit and never carries."""
    total, place = 0, 1
    while a or b:
        total += (a % 10 + b % 10) % 10 * place
        a, b, place = a // 10, b // 10, place * 10
    return total


def smaller_from_larger(a: int, b: int) -> int:
    """Column subtraction that takes the smaller digit from the larger in every column instead of borrowing."""
    total, place = 0, 1
    while a or b:
        total += abs(a % 10 - b % 10) * place
        a, b, place = a // 10, b // 10, place * 10
    return total


def misconceived_answer(expression: Node) -> int | None:
    """The answer the misconception gives, for one addition that carries or one subtraction that borrows."""
    if not (isinstance(expression, BinOp) and isinstance(expression.left, Num) and isinstance(expression.right, Num)):
        return None
    a, b = expression.left.value, expression.right.value
    if expression.op == "+" and has_carry(a, b):
        return dropped_carry(a, b)
    if expression.op == "-" and a >= b and has_borrow(a, b):
        return smaller_from_larger(a, b)
    return None
