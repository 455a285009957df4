"""Ground truth of the arith world for any problem text: is it a well-formed problem, what is its answer.

`solve` is what the filters of the pipeline are measured against: it recognises each defect the oracle
generator can inject (multiple choice, true/false, proof, answer leak, multi-part, ill-posed) from the text
alone, and for a well-formed problem returns its integer answer, category and concepts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from sws.worlds.arith import concepts as c
from sws.worlds.arith.expressions import (
    BinOp,
    ExpressionError,
    Node,
    Num,
    Undetermined,
    borrow_columns,
    carry_columns,
    evaluate,
    evaluate_left_to_right,
    numbers,
    operations,
    parse,
    render,
)

DEFECT_KINDS = ("ill_posed", "multi_part", "multiple_choice", "proof", "true_false", "answer_leak")


@dataclass(frozen=True)
class ProblemTruth:
    """`kind` is "ok" or a defect kind; `answer` is what a careful solver would box (None if nothing)."""

    kind: str
    answer: str | None = None
    category: str | None = None
    concepts: list[str] = field(default_factory=list)


_ASK = r"(?:compute|calculate|evaluate|find|what is)"
_QUESTION = re.compile(rf"^{_ASK}\s+(.+?)\s*[.?]$", re.IGNORECASE)
_REMAINDER_QUESTION = re.compile(
    r"^what is the remainder when (\d+) is divided by (\d+)\s*\?$", re.IGNORECASE
)
_PART = re.compile(rf"(?:\([a-z]\)\s*)?(?:then\s+)?{_ASK}\s+(.+?)[.?](?=\s|$)", re.IGNORECASE)
_TERM = r"[\d(](?:[\d\s+\-*()]*[\d)])?"
_EXPRESSION_RUN = re.compile(rf"{_TERM}(?:\s+mod\s+{_TERM})?")
_MULTIPLE_CHOICE = re.compile(r"\b(?:options?|choices?|choose)\b", re.IGNORECASE)
_CHOICE_LABEL = re.compile(r"\(?\b[A-D]\)")
_TRUE_FALSE = re.compile(r"\btrue or false\b|\bis it true\b", re.IGNORECASE)
_PROOF = re.compile(r"\b(?:prove|show)\b", re.IGNORECASE)
_LEAK = re.compile(r"\banswer\b|\bhint\b|\bresult is\b|=", re.IGNORECASE)
_CLAIM_EQUALS = re.compile(r"=\s*(-?\d+)")
_CLAIM_PARITY = re.compile(r"\bis (even|odd)\b", re.IGNORECASE)


def category_of(expression: Node) -> str:
    ops = [op.op for op in operations(expression)]
    if ops and ops[-1] == "mod":
        return "remainders"
    if "*" in ops:
        return "precedence" if {"+", "-"} & set(ops) else "multiplication"
    if len(ops) == 1:
        return "addition" if ops[0] == "+" else "subtraction"
    parenthesized = any(op.parenthesized for op in operations(expression))
    return "addition" if set(ops) == {"+"} and not parenthesized else "multi_step"


def concepts_of(expression: Node, category: str) -> list[str]:
    """The concepts a problem exercises, derived from its expression (headline concept first)."""
    tags: dict[str, None] = {}
    headline = {"precedence": c.ORDER_OF_OPERATIONS, "multi_step": c.MULTI_STEP}.get(category)
    if headline:
        tags[headline] = None
    ops = operations(expression)
    for op in ops:
        for tag in _operation_concepts(op):
            tags[tag] = None
    kinds = {op.op for op in ops}
    parenthesized = any(op.parenthesized for op in ops)
    values = numbers(expression)
    extra = [
        (parenthesized, c.PARENTHESES),
        ("*" in kinds and bool({"+", "-"} & kinds), c.MIXED_OPERATIONS),
        (category == "multi_step" and len(ops) >= 2 and not parenthesized, c.LEFT_TO_RIGHT),
        (category == "multi_step" and len(ops) >= 3, c.RUNNING_TOTAL),
        (category == "addition" and len(ops) >= 2, c.THREE_ADDENDS),
        (all(v < 10 for v in values), c.ONE_DIGIT),
        (any(10 <= v < 100 for v in values), c.TWO_DIGIT),
        (any(v >= 100 for v in values), c.THREE_DIGIT),
        (category in ("addition", "subtraction", "multiplication") and any(v >= 10 for v in values),
         c.PLACE_VALUE),
        *_order_concepts(expression, ops),
    ]
    for applies, tag in extra:
        if applies:
            tags[tag] = None
    return list(tags)


def _order_concepts(expression: Node, ops: list[BinOp]) -> list[tuple[bool, str]]:
    """Concepts of how the operations are ordered and grouped."""
    flat = parse(render(expression).replace("(", "").replace(")", ""))
    value = evaluate(expression)

    def is_product(node: Node) -> bool:
        return isinstance(node, BinOp) and node.op == "*" and not node.parenthesized

    return [
        (any(op.op == "*" for op in ops) and evaluate_left_to_right(expression) != value, c.PRECEDENCE_TRAP),
        (any(op.parenthesized for op in ops) and evaluate(flat) != value, c.PARENTHESES_MATTER),
        (any(op.parenthesized and op.op == "-" for op in ops), c.SUBTRACTION_IN_PARENTHESES),
        (any(op.op == "-" and is_product(op.right) for op in ops), c.SUBTRACTING_PRODUCT),
        (any(op.op in "+-" and is_product(op.left) and is_product(op.right) for op in ops), c.TWO_PRODUCTS),
        (any(op.op == "-" and isinstance(op.left, BinOp) and op.left.op == "-" and not op.left.parenthesized
             for op in ops), c.SUBTRACTIONS_IN_A_ROW),
    ]


def _operation_concepts(op: BinOp) -> list[str]:
    left, right = evaluate(op.left), evaluate(op.right)
    value = evaluate(op)
    numbers_first = isinstance(op.left, Num) and isinstance(op.right, Num) and left < right
    if op.op == "+":
        if left < 0 or right < 0:
            return [c.ADDITION]
        carries = carry_columns(left, right)
        return [c.ADDITION] + _flagged([
            (bool(carries), c.CARRYING), (0 in carries, c.CARRY_INTO_TENS), (1 in carries, c.CARRY_INTO_HUNDREDS),
            (len(carries) >= 2, c.REPEATED_CARRY), (left % 10 + right % 10 == 10, c.MAKING_TEN),
            (value >= 100 and value // 100 > max(left, right) // 100, c.CROSSING_HUNDRED),
            (numbers_first, c.SMALLER_FIRST),
        ])
    if op.op == "-":
        if not left >= right >= 0:
            return [c.SUBTRACTION]
        borrows = borrow_columns(left, right)
        return [c.SUBTRACTION] + _flagged([
            (bool(borrows), c.BORROWING), ((0, False) in borrows or (0, True) in borrows, c.BORROW_FROM_TENS),
            (any(column == 1 for column, _ in borrows), c.BORROW_FROM_HUNDREDS),
            (any(across for _, across in borrows), c.BORROW_ACROSS_ZERO), (len(borrows) >= 2, c.REPEATED_BORROW),
            (left >= 10 and left % 10 == 0 and right % 10 != 0, c.FROM_ROUND_NUMBER),
            (left >= 100 and left // 100 > value // 100, c.CROSSING_HUNDRED),
        ])
    if op.op == "*":
        small = (abs(left) < 10) + (abs(right) < 10)
        tags = [c.MULTIPLICATION, {2: c.TIMES_TABLE, 1: c.BY_ONE_DIGIT, 0: c.MULTI_DIGIT_PRODUCT}[small]]
        return tags + _flagged([
            (any(v and v % 10 == 0 for v in (left, right)), c.MULTIPLES_OF_TEN),
            (any(v >= 10 and "0" in str(v) for v in (left, right)), c.ZERO_DIGIT),
            (_product_carries(abs(left), abs(right)), c.PRODUCT_CARRY), (left == right, c.SQUARE),
            (abs(value) >= 100, c.PRODUCT_OVER_HUNDRED), (numbers_first, c.SMALLER_FIRST),
        ])
    remainder = left % right
    tags = [c.DIVISION, c.REMAINDER]
    if remainder == 0:
        tags.append(c.DIVISIBILITY)
    if left >= 100:
        tags.append(c.LONG_DIVISION)
    elif right < 10:
        tags.append(c.TIMES_TABLE)
    return tags + _flagged([
        (left < right, c.DIVIDEND_SMALLER), (right > 2 and remainder == right - 1, c.LARGEST_REMAINDER),
        (right > 2 and remainder == 1, c.REMAINDER_ONE), (right >= 10, c.TWO_DIGIT_DIVISOR), (right == 2, c.PARITY),
    ])


def _flagged(pairs: list[tuple[bool, str]]) -> list[str]:
    return [tag for applies, tag in pairs if applies]


def _product_carries(a: int, b: int) -> bool:
    """Whether some digit of the shorter factor times the longer one carries into a further column (13*4)."""
    longer, shorter = max(a, b), min(a, b)
    for digit in str(shorter):
        carry, rest = 0, longer
        while rest >= 10:
            carry = (rest % 10 * int(digit) + carry) // 10
            if carry:
                return True
            rest //= 10
    return False


def _truth_of_expression(text: str, kind: str = "ok") -> ProblemTruth:
    """Truth of one expression; one without an operation or without a single value is ill-posed."""
    try:
        expression = parse(text)
        value = evaluate(expression)
    except (ExpressionError, Undetermined):
        return ProblemTruth("ill_posed")
    if not operations(expression):
        return ProblemTruth("ill_posed")
    category = category_of(expression)
    return ProblemTruth(kind, str(value), category, concepts_of(expression, category))


# The skills a family is named by: the structural concepts refine problems within a family and name none, so
# that results keyed by family stay comparable.
_FAMILY_SKILLS = frozenset({c.CARRYING, c.THREE_ADDENDS, c.BORROWING, c.TIMES_TABLE, c.BY_ONE_DIGIT,
                            c.MULTI_DIGIT_PRODUCT, c.MULTIPLES_OF_TEN, c.DIVISIBILITY, c.LONG_DIVISION,
                            c.PARENTHESES, c.LEFT_TO_RIGHT, c.RUNNING_TOTAL})


def family_of(text: str) -> str | None:
    """A problem's family, from its expression: its category and the skills it needs (`addition: addition with
    carrying`, `subtraction: plain`); None when the text holds no expression."""
    expression = find_expression(text)
    if expression is None:
        return None
    category = category_of(expression)
    skills = [tag for tag in concepts_of(expression, category) if tag in _FAMILY_SKILLS]
    return f"{category}: {', '.join(sorted(skills)) or 'plain'}"


def find_expression(text: str) -> Node | None:
    """The first run of the text that is an expression with an operation and a single value."""
    for match in _EXPRESSION_RUN.finditer(text):
        candidate = match.group(0).strip()
        if _truth_of_expression(candidate).kind == "ok":
            return parse(candidate)
    return None


def _with_kind(text: str, kind: str, answer_from_claim: bool = False) -> ProblemTruth:
    expression = find_expression(text)
    if expression is None:
        return ProblemTruth(kind)
    truth = _truth_of_expression(render(expression))
    answer: str | None = truth.answer
    if answer_from_claim:
        answer = _judge_claim(text, int(truth.answer))
    return ProblemTruth(kind, answer, truth.category, truth.concepts)


def _judge_claim(text: str, value: int) -> str | None:
    if match := _CLAIM_EQUALS.search(text):
        return str(int(match.group(1)) == value)
    if match := _CLAIM_PARITY.search(text):
        return str((value % 2 == 0) == (match.group(1).lower() == "even"))
    return None


def solve(problem: str) -> ProblemTruth:
    """Classify any problem text and, for a well-formed one, compute its answer, category and concepts."""
    text = " ".join(problem.split())
    if not text:
        return ProblemTruth("ill_posed")
    if _MULTIPLE_CHOICE.search(text) or len(_CHOICE_LABEL.findall(text)) >= 2:
        return _with_kind(text, "multiple_choice")
    if _TRUE_FALSE.search(text):
        return _with_kind(text, "true_false", answer_from_claim=True)
    if _PROOF.search(text):
        proof = _with_kind(text, "proof")
        return ProblemTruth("proof", None, proof.category, proof.concepts)
    if _LEAK.search(text):
        return _with_kind(text, "answer_leak")
    parts = _PART.findall(text)
    if len(parts) >= 2:
        return _truth_of_expression(parts[0], "multi_part")
    if match := _REMAINDER_QUESTION.match(text):
        return _truth_of_expression(f"{match.group(1)} mod {match.group(2)}")
    match = _QUESTION.match(text)
    if match is None:
        return ProblemTruth("ill_posed")
    body = match.group(1)
    pieces = re.split(r"\s+and\s+|\s*,\s*", body)
    if len(pieces) >= 2 and all(_truth_of_expression(piece).kind == "ok" for piece in pieces):
        return _truth_of_expression(pieces[0], "multi_part")
    return _truth_of_expression(body)
