"""Parsers for teacher-model outputs: concept lists, the final problem of a generation, a judge's verdict line.

The rules are written from what real instruct models write (recorded outputs under tests/fixtures/teacher_outputs):
a generator often keeps going after its problem with "To solve this problem…", a `---` rule, `### Solution`,
`**Analysis:**` or a final `\\boxed{}`; `split_solution` cuts the problem there. A judge often answers with a
bare verdict line; `parse_judgement` accepts a verdict only below an analysis.

Model output is data: list literals go through `json.loads` or `ast.literal_eval`, never `eval`. Every parser
returns None when the output holds nothing usable, and never raises on any string.
Reasoning models wrap their thinking in `<think>…</think>`; only the text after it counts. A think block that
never closes is a truncated output and yields nothing.
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass

THINK_OPEN = re.compile(r"<think>", re.IGNORECASE)
THINK_CLOSE = re.compile(r"</think>", re.IGNORECASE)
# A list literal without nested brackets; concept lists never nest, and this keeps the search linear.
LIST_LITERAL = re.compile(r"\[[^\[\]]*\]")
LIST_ITEM_LINE = re.compile(r"^\s*(?:\d{1,3}\s*[.):]|[-*•+])\s+(?P<item>\S.*)$")
LEADING_BOLD = re.compile(r"^(\*\*|__)(?P<name>.+?)\1")
MARKDOWN_EMPHASIS = re.compile(r"\*\*|__|`")
# "Name: explanation" or "Name - explanation"; a short head is the concept's name.
NAME_AND_GLOSS = re.compile(r"^(?P<name>[^:–—]+?)\s*(?::|\s[-–—]\s)\s*\S")
MAX_GLOSS_NAME_WORDS = 6
MAX_LITERAL_CHARS = 20_000
MAX_CONCEPT_CHARS = 120

PROBLEM_WORDS = r"(?:(?:final|new|synthesi[sz]ed|generated)\s+)?problem(?:\s+statement)?\b"
# Markers that introduce the final problem, strongest first: a markdown heading, a bold label, a plain label.
# Text on a heading's line counts only after a colon: "### Problem Solution" is no problem marker.
PROBLEM_MARKERS = (
    re.compile(rf"^\s*#{{1,6}}\s*(?:\*\*)?\s*{PROBLEM_WORDS}\s*(?P<colon>:?)\s*(?:\*\*)?\s*:?\s*(?P<rest>.*)$", re.I),
    re.compile(rf"^\s*(?:\*\*|__)\s*{PROBLEM_WORDS}\s*(?P<colon>:?)\s*(?:\*\*|__)\s*:?\s*(?P<rest>.*)$", re.I),
    re.compile(rf"^\s*{PROBLEM_WORDS}\s*(?P<colon>:)\s*(?P<rest>.*)$", re.I),
)
# Lines where the text after a problem starts: a heading (also a bare "###"), a horizontal rule, a section label
# ("Solution", "**Analysis:**", "#### Answer", "Step-by-Step Solution:"; not "Note:", which competition problems
# use for conventions), a "Step 1", the opening of a
# worked solution ("To solve this problem, we…", "Let's solve…", "We need to…"), or a final answer.
_LABELS = (r"(?:step[- ]by[- ]step\s+)?(?:solution|answer|final\s+answer|explanation|analysis|verification|"
           r"check|hint|reasoning|working)s?")
SOLUTION_START = re.compile(
    r"^\s*(?:#{1,6}(?:\s|$)|(?:-{3,}|\*{3,}|_{3,})\s*$|"
    rf"(?:\*\*|__)?\s*{_LABELS}\s*(?:\*\*|__)?\s*(?::|$)|"
    r"(?:\*\*|__)?\s*step\s*1\b|"
    r"to\s+(?:solve|find|determine|compute|calculate|evaluate|answer)\b[^\n]*?,\s*(?:we|let's|let\s+us|i)\b|"
    r"let's\s+(?:solve|start|begin|break|work|go\s+through|calculate|compute|find|simplify|first)\b|"
    r"we\s+(?:need|have|want)\s+to\s+(?:find|solve|determine|calculate|compute|use|follow)\b|"
    r"(?:the\s+)?final\s+answer\b|the\s+answer\s+is\b)",
    re.I,
)
FENCE = re.compile(r"^\s*(```|~~~)")
VERDICT_LINE = re.compile(
    r"^[ \t>*_#`]*(?:final\s+)?verdict\b[ \t*_`]*[:=\-–—]?[ \t*_`]*(?P<verdict>[A-Za-z]*)",
    re.I | re.M,
)
VERDICTS = ("perfect", "acceptable", "bad")
# A verdict counts only below an analysis of at least this many words: "Verdict: perfect" alone is a rubber stamp.
MIN_ANALYSIS_WORDS = 5


def final_text(text: str) -> str:
    """The part of an output after its reasoning: text after the last `</think>`; '' if a think block is open."""
    closes = list(THINK_CLOSE.finditer(text))
    if closes:
        return text[closes[-1].end():]
    opened = THINK_OPEN.search(text)
    return text[: opened.start()] if opened else text


# ---------------------------------------------------------------- concepts


def normalize_concept(concept: str) -> str:
    """The spelling used to compare concepts across problems: one-spaced, lower case, no closing punctuation."""
    return re.sub(r"\s+", " ", concept).strip().strip(".;,").strip().casefold()


def parse_concepts(text: str, k: int | None = None) -> list[str] | None:
    """Distinct normalised concepts listed in `text` (at most `k`), or None when no list is found.

    Tries, in order: the last JSON list of strings, the last Python list literal, then numbered or bulleted lines.
    """
    body = final_text(text)
    items = _last_list_literal(body)
    if items is None:
        items = [match.group("item") for line in body.splitlines() if (match := LIST_ITEM_LINE.match(line))]
    concepts: list[str] = []
    for item in items:
        concept = normalize_concept(_concept_name(item))
        if concept and len(concept) <= MAX_CONCEPT_CHARS and concept not in concepts:
            concepts.append(concept)
    if not concepts:
        return None
    return concepts[:k] if k is not None else concepts


def _last_list_literal(text: str) -> list[str] | None:
    for match in reversed(list(LIST_LITERAL.finditer(text))):
        literal = match.group(0)
        if len(literal) > MAX_LITERAL_CHARS:
            continue
        items = _as_string_list(_load_literal(literal))
        if items:
            return items
    return None


def _load_literal(literal: str) -> object:
    try:
        return json.loads(literal)
    except ValueError:
        pass
    try:
        return ast.literal_eval(literal)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return None


def _as_string_list(value: object) -> list[str] | None:
    if not isinstance(value, list):
        return None
    items = []
    for element in value:
        if isinstance(element, dict):  # [{"concept": "...", "why": "..."}]
            element = next((v for v in element.values() if isinstance(v, str)), None)
        if isinstance(element, str):
            items.append(element)
        elif isinstance(element, int | float) and not isinstance(element, bool):
            items.append(str(element))
    return items or None


def _concept_name(item: str) -> str:
    """The concept named by one list item, without markdown and without a trailing explanation."""
    item = item.strip().strip("\"'")
    bold = LEADING_BOLD.match(item)
    if bold:
        return bold.group("name").strip().rstrip(":")
    item = MARKDOWN_EMPHASIS.sub("", item)
    gloss = NAME_AND_GLOSS.match(item)
    if gloss and len(gloss.group("name").split()) <= MAX_GLOSS_NAME_WORDS:
        return gloss.group("name")
    return item


# ---------------------------------------------------------------- generated problem


def parse_problem(text: str) -> str | None:
    """The problem under the last `### Problem` marker (or a bold / plain `Problem:` label), or None.

    The problem runs to where a solution, an answer or another section starts (`split_solution`); code fences
    and enclosing bold are removed.
    """
    return parse_problem_and_end(text)[0]


def parse_problem_and_end(text: str) -> tuple[str | None, bool]:
    """`parse_problem`'s problem, and whether the text goes on past it (a solution or another section starts
    after it): then the problem is whole even if the output was cut off later."""
    lines = final_text(text).splitlines()
    for marker in PROBLEM_MARKERS:
        found = [(index, match) for index, line in enumerate(lines)
                 if (match := marker.match(line)) and _is_marker(match)]
        if found:
            index, match = found[-1]
            body = "\n".join(line for line in [match.group("rest"), *lines[index + 1:]] if not FENCE.match(line))
            statement, after = split_solution(body)
            return _unwrapped(statement) or None, after is not None
    return None, False


def _is_marker(match: re.Match[str]) -> bool:
    rest = match.group("rest").strip()
    return bool(match.group("colon")) or not rest[:1].isalpha()


def split_solution(problem: str) -> tuple[str, str | None]:
    """(the problem statement, the solution or answer text that follows it, None if there is none).

    The statement ends at the first line after its first non-empty one where a solution starts (SOLUTION_START).
    """
    lines = problem.splitlines()
    started = False
    for position, line in enumerate(lines):
        if started and _starts_solution(line):
            return "\n".join(lines[:position]).strip(), "\n".join(lines[position:]).strip()
        started = started or bool(line.strip())
    return problem.strip(), None


def _starts_solution(line: str) -> bool:
    # `\boxed{` counts anywhere on the line; every other form only where the line starts.
    match = SOLUTION_START.match(line)
    return match is not None or "\\boxed{" in line


def _unwrapped(body: str) -> str:
    while len(body) >= 4 and body[:2] in ("**", "__") and body.endswith(body[:2]):
        body = body[2:-2].strip()
    return re.sub(r"\n{3,}", "\n\n", body)


# ---------------------------------------------------------------- verdict


@dataclass(frozen=True)
class Judgement:
    verdict: str
    analysis: str


def parse_judgement(text: str) -> Judgement | None:
    """The verdict of the last `Verdict: …` line and the analysis above it.

    None when there is no verdict line, when the last one names no rating of VERDICTS ("Verdict: good"), or when
    fewer than MIN_ANALYSIS_WORDS words stand above it.
    """
    body = final_text(text)
    matches = list(VERDICT_LINE.finditer(body))
    if not matches:
        return None
    last = matches[-1]
    verdict = last.group("verdict").lower()
    analysis = body[:last.start()].strip()
    if verdict not in VERDICTS or len(analysis.split()) < MIN_ANALYSIS_WORDS:
        return None
    return Judgement(verdict, analysis)
