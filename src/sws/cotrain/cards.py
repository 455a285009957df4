"""Task cards: what the synthesizer writes, one `key: value` per line.

`problem` is required; `answer` (alias `final_answer`, SynCo's key), `solution`, `category`, `intent` and
`difficulty` are optional. A solution may run over several lines: every line up to the next key is its. A world
that computes its own truth names the category itself; otherwise the card's is taken. Values are kept as text,
so an answer of `0` is an answer (SynCo rejected it as falsy).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_LINE = re.compile(r"^\s*([a-z_]+)\s*:\s*(.*?)\s*$")
_ALIASES = {"final_answer": "answer"}
KNOWN_KEYS = ("problem", "answer", "solution", "category", "intent", "difficulty")
MULTILINE_KEYS = ("solution",)


@dataclass(frozen=True)
class TaskCard:
    problem: str
    answer: str | None = None
    solution: str | None = None  # the synthesizer's worked solution, its final answer read by the world's verifier
    category: str | None = None
    intent: str | None = None
    difficulty: float | None = None


class CardError(ValueError):
    """Why a card cannot be read; its message is the reject reason code."""


def parse_card(text: str) -> TaskCard:
    fields: dict[str, str] = {}
    current = None  # the key whose value a line without one continues
    for line in text.splitlines():
        match = _LINE.match(line)
        key = _ALIASES.get(match.group(1), match.group(1)) if match else None
        if key in KNOWN_KEYS:
            current = key if key not in fields else None
            if current is not None:
                fields[key] = match.group(2)
        elif current in MULTILINE_KEYS:
            fields[current] += "\n" + line
    problem = fields.get("problem", "")
    if not problem:
        raise CardError("no_problem")
    answer = fields.get("answer")
    return TaskCard(problem=problem, answer=answer if answer != "" else None,
                    solution=fields.get("solution", "").strip() or None,
                    category=fields.get("category") or None, intent=fields.get("intent") or None,
                    difficulty=_difficulty(fields.get("difficulty")))


def _difficulty(value: str | None) -> float | None:
    try:
        return float(value) if value else None
    except ValueError:
        return None


def render_card(card: TaskCard) -> str:
    """The card as the synthesizer is taught to write it (the bootstrap's targets)."""
    lines = [f"problem: {card.problem}"]
    if card.solution is not None:
        lines.append(f"solution: {card.solution}")
    if card.answer is not None:
        lines.append(f"answer: {card.answer}")
    return "\n".join(lines)
