"""The math verifier: the final answer of `\\boxed{…}` (or "the answer is …"), compared by math-verify.

math-verify turns LaTeX into SymPy, and SymPy can run for ever on hostile input (`9^{9^{9^{9}}}`) inside C code
that no signal interrupts, so comparisons run in `sws.grading`'s worker processes, each with a deadline;
math-verify's own timeouts (half the deadline) end most slow comparisons first. Two cheap cases skip
math-verify: identical spellings (no whitespace, no surrounding `$`) are equivalent, and two plain integers are
compared as integers, both in the calling process.

Answers are strings as `extract_answer` returns them (not whole model outputs); a gold answer or prediction
without math delimiters is wrapped in `$…$` before parsing, since math-verify finds nothing in bare LaTeX.
Only the standard library is imported at load time (math-verify on first comparison): verl's reward module
grades with this verifier where sws's dependencies are not installed.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from sws.verifier import Verifier, normalize_answer, without_dollar_delimiters

# ---------------------------------------------------------------- extraction

_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_BARE_BOX_ARGUMENT = re.compile(r"\s+([^\s$]+)")
# Fallbacks when no box is present, in this order: "… answer is X" / "Answer: X" / "answer = X" (the last such
# phrase in the text), then GSM8K's "#### X". X runs to the end of its line.
_ANSWER_PHRASE = re.compile(r"\banswer\s*(?:is\b|:|=)", re.IGNORECASE)
_GSM8K_MARKER = re.compile(r"####")


def extract_answer(text: str) -> str | None:
    """The final answer stated in a model output, or None when it states none.

    The argument of the last `\\boxed{…}` or `\\fbox{…}` (nested braces; `\\boxed 5` also works). A last box
    left unclosed (a truncated output) gives None. Without any box, the fallbacks are the last "the answer is X"
    (also "Answer: X", "final answer = X"), then the last GSM8K-style "#### X". Surrounding `$` and trailing
    punctuation are stripped.
    """
    if not text:
        return None
    boxes = list(_BOX_COMMAND.finditer(text))
    if boxes:
        return _clean(_box_argument(text, boxes[-1].end()))
    for pattern in (_ANSWER_PHRASE, _GSM8K_MARKER):
        matches = list(pattern.finditer(text))
        if matches:
            return _clean(text[matches[-1].end() :].split("\n", 1)[0])
    return None


def _box_argument(text: str, start: int) -> str | None:
    """The argument of a box command ending at `start`: a balanced `{…}` group or a bare token."""
    position = start
    while position < len(text) and text[position] == " ":
        position += 1
    if position < len(text) and text[position] == "{":
        return _braced_group(text, position)
    bare = _BARE_BOX_ARGUMENT.match(text, start)
    return bare.group(1) if bare else None


def _braced_group(text: str, open_at: int) -> str | None:
    """Contents of the brace group opening at `open_at`, skipping escaped `\\{` `\\}`; None if never closed."""
    depth = 0
    position = open_at
    while position < len(text):
        char = text[position]
        if char == "\\":
            position += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : position]
        position += 1
    return None


def _clean(answer: str | None) -> str | None:
    if answer is None:
        return None
    return without_dollar_delimiters(answer.strip().rstrip(".,;").strip()).strip() or None


# ---------------------------------------------------------------- equivalence

_UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")
_PLAIN_INTEGER = re.compile(r"(?P<sign>[+-]?)0*(?P<digits>\d+)")


def _integer_spelling(answer: str) -> str | None:
    """One spelling per integer (`+007` -> `7`, `-0` -> `0`) for plain integers, else None.

    Compared as text, so a 10,000-digit answer costs no int conversion (which Python limits to 4,300 digits).
    """
    match = _PLAIN_INTEGER.fullmatch(normalize_answer(answer))
    if match is None:
        return None
    digits = match.group("digits").lstrip("0") or "0"
    return f"-{digits}" if match.group("sign") == "-" and digits != "0" else digits


def _as_math(answer: str) -> str:
    """The answer with math delimiters, which math-verify needs to find LaTeX (`\\$` is a dollar sign, not one)."""
    if _UNESCAPED_DOLLAR.search(answer) or "\\boxed" in answer or "\\(" in answer or "\\[" in answer:
        return answer
    return f"${answer}$"


@dataclass(frozen=True)
class MathVerifier(Verifier):
    """math-verify equivalence, gold first; `step_timeout_s` bounds each of its parse and verify steps."""

    step_timeout_s: int = 2

    def extract(self, text: str) -> str | None:
        return extract_answer(text)

    def equivalent(self, reference: str, answer: str) -> bool:
        from math_verify import parse, verify

        gold_parsed = parse(_as_math(reference), parsing_timeout=self.step_timeout_s)
        pred_parsed = parse(_as_math(answer), parsing_timeout=self.step_timeout_s)
        if not gold_parsed or not pred_parsed:
            return False
        return bool(verify(gold_parsed, pred_parsed, timeout_seconds=self.step_timeout_s))

    def quick_verdict(self, reference: str, answer: str) -> bool | None:
        reference_integer, answer_integer = _integer_spelling(reference), _integer_spelling(answer)
        if reference_integer is None or answer_integer is None:
            return None
        return reference_integer == answer_integer

    def in_worker(self, deadline_s: float) -> MathVerifier:
        # math-verify logs every timeout with the whole input; the pool counts timeouts instead.
        logging.getLogger("math_verify").setLevel(logging.CRITICAL)
        # Its signal timeouts end most slow comparisons gracefully; the pool's kill is the backstop.
        verifier = MathVerifier(step_timeout_s=max(1, int(deadline_s // 2)))
        verifier.equivalent("x^2+\\frac{1}{2}", "0.5+x^2")  # imports and parser tables
        return verifier
