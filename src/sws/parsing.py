"""Parsers for teacher-model outputs: concept lists, the final problem of a generation, a judge's verdict line.

Model output is data: list literals go through `json.loads` or `ast.literal_eval`, never `eval`. Every parser
returns None when the output holds nothing usable, and never raises on any string.
Reasoning models wrap their thinking in `<think>…</think>`; only the text after it counts. A think block that
never closes is a truncated output and yields nothing.
"""

from __future__ import annotations

import ast
import json
import re

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

PROBLEM_WORDS = r"(?:(?:final|new|synthesi[sz]ed|generated)\s+)?problem(?:\s+statement)?"
# Markers that introduce the final problem, strongest first: a markdown heading, a bold label, a plain label.
PROBLEM_MARKERS = (
    re.compile(rf"^\s*#{{1,6}}\s*(?:\*\*)?\s*{PROBLEM_WORDS}\s*:?\s*(?:\*\*)?\s*:?\s*(?P<rest>.*)$", re.I),
    re.compile(rf"^\s*(?:\*\*|__)\s*{PROBLEM_WORDS}\s*:?\s*(?:\*\*|__)\s*:?\s*(?P<rest>.*)$", re.I),
    re.compile(rf"^\s*{PROBLEM_WORDS}\s*:\s*(?P<rest>.*)$", re.I),
)
# Where a problem body ends: the next heading, or a label that starts a solution/answer/notes section.
SECTION_END = re.compile(
    r"^\s*(?:#{1,6}\s|(?:\*\*|__)?\s*(?:solution|answer|final answer|explanation|notes?|verification|check)"
    r"\s*(?:\*\*|__)?\s*:)",
    re.I,
)
FENCE = re.compile(r"^\s*(```|~~~)")
VERDICT_LINE = re.compile(
    r"^[ \t>*_#`]*(?:final\s+)?verdict[ \t*_`]*[:=\-–—]?[ \t*_`]*(?P<verdict>perfect|acceptable|bad)\b",
    re.I | re.M,
)
VERDICTS = ("perfect", "acceptable", "bad")


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

    The problem runs to the next heading or solution/answer label; code fences and enclosing bold are removed.
    """
    lines = final_text(text).splitlines()
    for marker in PROBLEM_MARKERS:
        found = [(index, match) for index, line in enumerate(lines) if (match := marker.match(line))]
        if found:
            index, match = found[-1]
            return _problem_body([match.group("rest"), *lines[index + 1:]])
    return None


def _problem_body(lines: list[str]) -> str | None:
    kept: list[str] = []
    for position, line in enumerate(lines):
        if FENCE.match(line):
            continue
        if position > 0 and SECTION_END.match(line) and any(part.strip() for part in kept):
            break
        kept.append(line)
    body = "\n".join(kept).strip()
    while len(body) >= 4 and body[:2] in ("**", "__") and body.endswith(body[:2]):
        body = body[2:-2].strip()
    body = re.sub(r"\n{3,}", "\n\n", body)
    return body or None


# ---------------------------------------------------------------- verdict


def parse_verdict(text: str) -> str | None:
    """'perfect', 'acceptable' or 'bad' from the last `Verdict: …` line, or None when there is none."""
    matches = list(VERDICT_LINE.finditer(final_text(text)))
    return matches[-1].group("verdict").lower() if matches else None
