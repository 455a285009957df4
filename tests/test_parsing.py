"""Parsers on completions written the way real instruction and reasoning models write them, plus fuzzing."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sws.parsing import (
    final_text,
    normalize_concept,
    parse_concepts,
    parse_judgement,
    parse_problem,
    split_solution,
)

# ---------------------------------------------------------------- concepts

QWEN_JSON_FENCE = """```json
["Place value", "Carrying in multi-digit addition", "Column addition", "Estimation", "Checking by subtraction"]
```"""

R1_THINK_THEN_BOLD_LIST = """<think>
Okay, so the problem is 47 + 85. The user wants foundational concepts. Maybe ["draft one", "draft two"]?
No wait, they want exactly 5. Let me list them properly.
</think>

Here are the five foundational concepts:

1. **Place value**: understanding that digits represent ones, tens and hundreds.
2. **Carrying (regrouping)**: moving a ten to the next column when a column sums past 9.
3. **Single-digit addition facts** – recalling sums such as 7 + 5 quickly.
4. **Column alignment**: writing numbers so that digits of equal place line up.
5. **Estimation**: rounding to check that the answer is reasonable.
"""

PYTHON_LIST = "['order of operations', 'multiplication before addition', 'two-digit multiplication']"

BULLETS_WITH_PREAMBLE = """Sure! The key concepts are:

- Modular arithmetic
- Division with remainder
* Divisibility rules
• Long division
- Multiplication tables
"""

NUMBERED_PAREN_WITH_GLOSS = """1) Modular arithmetic - the remainder left after division
2) Long division - dividing step by step
3) Place value
"""

LIST_OF_DICTS = '[{"concept": "Order of operations", "why": "multiplication first"}, {"concept": "Parentheses"}]'

HEADING_AND_DASHES = """### Foundational concepts
1. **Order of Operations** — multiplication is done before addition
2. **Multi-digit multiplication**
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (QWEN_JSON_FENCE, ["place value", "carrying in multi-digit addition", "column addition", "estimation",
                           "checking by subtraction"]),
        (R1_THINK_THEN_BOLD_LIST, ["place value", "carrying (regrouping)", "single-digit addition facts",
                                   "column alignment", "estimation"]),
        (PYTHON_LIST, ["order of operations", "multiplication before addition", "two-digit multiplication"]),
        (BULLETS_WITH_PREAMBLE, ["modular arithmetic", "division with remainder", "divisibility rules",
                                 "long division", "multiplication tables"]),
        (NUMBERED_PAREN_WITH_GLOSS, ["modular arithmetic", "long division", "place value"]),
        (LIST_OF_DICTS, ["order of operations", "parentheses"]),
        (HEADING_AND_DASHES, ["order of operations", "multi-digit multiplication"]),
    ],
)
def test_concept_lists_in_real_model_formats(text: str, expected: list[str]) -> None:
    assert parse_concepts(text) == expected


def test_concepts_are_deduplicated_across_case_and_spacing() -> None:
    text = '["Place  value", "place value", "PLACE VALUE.", "Carrying"]'
    assert parse_concepts(text) == ["place value", "carrying"]


def test_concepts_are_cut_to_k() -> None:
    assert parse_concepts(BULLETS_WITH_PREAMBLE, k=2) == ["modular arithmetic", "division with remainder"]


@pytest.mark.parametrize(
    "text",
    [
        "<think>\nThe concepts here are probably:\n1. addition\n2. carrying\n3.",  # truncated inside the think
        "I'm sorry, but I can't help with that request.",
        "",
        "[]",
        "```json\n[",
    ],
)
def test_no_concept_list_gives_none(text: str) -> None:
    assert parse_concepts(text) is None


def test_list_literals_are_never_executed(tmp_path: Path) -> None:
    marker = tmp_path / "executed"
    hostile = f"[\"ok\", __import__('pathlib').Path({str(marker)!r}).touch()]"
    parse_concepts(hostile)
    assert not marker.exists()


def test_normalize_concept() -> None:
    assert normalize_concept("  Order   of\tOperations. ") == "order of operations"


# ---------------------------------------------------------------- problems

EXACT_FORMAT = """I need a hard addition problem that uses carrying and place value.
I will use three-digit numbers so that two columns carry.

### Problem
Compute 478+356.
"""

BOLD_LABEL = """Let me design a problem around remainders.

**Problem:** A baker packs 437 cookies into boxes of 12. How many cookies are left over?
"""

FENCED = """### Problem
```
Compute (17-4)*6.
```
"""

R1_WITH_DRAFT_IN_THINK = """<think>
Draft:
### Problem
Compute 2+2.
That is too easy for a hard level. Let me make it harder.
</think>

### Problem
What is the remainder when $2^{10}$ is divided by $7$?
"""

HEADING_THEN_SOLUTION = """## Problem Statement

Let $x$ be a positive integer such that $x^2 - 5x + 6 = 0$ and $x > 2$.

Find $x$.

## Solution

Factoring gives $(x-2)(x-3)=0$, so $x = 3$.
"""

BOLD_BODY = """### Problem:
**Find the remainder when 2024 is divided by 7.**
"""

NEW_PROBLEM_HEADING = """### New Problem
A rectangle has perimeter $36$ and length twice its width. What is its area?

### Answer
72
"""

PLAIN_LABEL_THEN_ANSWER = """Problem: Compute 12*34.
Answer: 408
"""

DISPLAY_MATH = r"""### Problem
Evaluate
\[
\sum_{k=1}^{10} k^2 .
\]
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (EXACT_FORMAT, "Compute 478+356."),
        (BOLD_LABEL, "A baker packs 437 cookies into boxes of 12. How many cookies are left over?"),
        (FENCED, "Compute (17-4)*6."),
        (R1_WITH_DRAFT_IN_THINK, "What is the remainder when $2^{10}$ is divided by $7$?"),
        (HEADING_THEN_SOLUTION,
         "Let $x$ be a positive integer such that $x^2 - 5x + 6 = 0$ and $x > 2$.\n\nFind $x$."),
        (BOLD_BODY, "Find the remainder when 2024 is divided by 7."),
        (NEW_PROBLEM_HEADING, "A rectangle has perimeter $36$ and length twice its width. What is its area?"),
        (PLAIN_LABEL_THEN_ANSWER, "Compute 12*34."),
        (DISPLAY_MATH, "Evaluate\n\\[\n\\sum_{k=1}^{10} k^2 .\n\\]"),
    ],
)
def test_final_problem_in_real_model_formats(text: str, expected: str) -> None:
    assert parse_problem(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Here is a nice problem: compute 3+4.",  # no marker at all
        "<think>\nI will write:\n### Problem\nCompute 3+",  # truncated inside the reasoning
        "### Problem\n",  # marker with nothing after it
        "### Problem\n```\n```",
    ],
)
def test_no_final_problem_gives_none(text: str) -> None:
    assert parse_problem(text) is None


@pytest.mark.parametrize(
    "after",
    [
        "\n---\n\nTo solve this problem, we need to compute 91*7 = 637.",
        "\n### Solution\n91*7 = 637",
        "\n###\n\nTo find the product, we multiply.",
        "\n**Analysis:** multiply the numbers.",
        "\n#### Answer\n637",
        "\nTo solve for the product, we multiply.",
        "\n### Step-by-Step Solution:\n1. Multiply.",
        "\n**Step 1: Multiply**",
        "\nLet's solve it: 91*7 = 637.",
        "\nThe answer is 637.",
        "\n\\[ 91 \\cdot 7 = \\boxed{637} \\]",
    ],
)
def test_a_problem_ends_where_its_solution_starts(after: str) -> None:
    assert parse_problem("### Problem\nCompute 91*7." + after) == "Compute 91*7."


def test_a_heading_that_only_starts_with_problem_is_no_marker() -> None:
    text = "### Problem\nFind x if 2x = 6.\n\n### Problem Solution\nTo solve this problem, we divide by 2."
    assert parse_problem(text) == "Find x if 2x = 6."


def test_notes_and_question_labels_stay_in_the_problem() -> None:
    body = "Find the area of the circle of radius 2.\n\nNote: the area of a circle of radius r is pi r^2."
    assert split_solution(body) == (body, None)
    question = "Let P be a cubic with P(1) = 0.\n\n**Question:** How many such P have integer roots?"
    assert parse_problem("### Problem\n" + question) == question


def test_split_solution_returns_the_text_it_cut() -> None:
    statement, solution = split_solution("Compute 2+3.\n\n---\nTo solve this problem, we add: \\boxed{5}")
    assert statement == "Compute 2+3." and solution == "---\nTo solve this problem, we add: \\boxed{5}"


def test_last_marker_wins() -> None:
    text = "### Problem\nCompute 1+1.\n\nOn second thought, harder:\n\n### Problem\nCompute 91*7.\n"
    assert parse_problem(text) == "Compute 91*7."


# ---------------------------------------------------------------- verdicts


ANALYSIS = "Standalone, one numeric answer, no parts, no hints, well-posed.\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (ANALYSIS + "Verdict: perfect", "perfect"),
        ("The wording is a little terse, but every quantity is given.\n\n**Verdict:** Acceptable", "acceptable"),
        ("It asks for two results, so it has parts.\nFinal verdict: **bad**", "bad"),
        ("<think>\nMaybe Verdict: bad? No, it is fine.\n</think>\n" + ANALYSIS + "Verdict: perfect", "perfect"),
        ("Verdict: acceptable\nActually, re-reading it, the answer is leaked.\nVerdict: bad", "bad"),
        (ANALYSIS + "Verdict - perfect", "perfect"),
        (ANALYSIS + "> **Verdict**: PERFECT.", "perfect"),
    ],
)
def test_verdict_lines_below_an_analysis(text: str, expected: str) -> None:
    judgement = parse_judgement(text)
    assert judgement is not None and judgement.verdict == expected
    assert judgement.analysis and "Verdict: " + expected not in judgement.analysis.splitlines()[-1:]


@pytest.mark.parametrize(
    "text",
    [
        "The problem is perfect.",  # no verdict line
        ANALYSIS + "Verdict: excellent",  # not one of the three ratings
        ANALYSIS + "Verdict: perfect\nVerdict: good",  # the last verdict line decides, and it is outside the set
        "Verdict: perfect",  # a rubber stamp: nothing above it
        "Looks fine.\nVerdict: perfect",  # too little analysis to count
        "<think>\nLet me check each criterion. Verdict: perf",  # truncated
        "",
    ],
)
def test_verdicts_without_analysis_or_outside_the_set_give_none(text: str) -> None:
    assert parse_judgement(text) is None


def test_final_text_after_unopened_close_tag() -> None:
    # Some reasoning models' chat templates open the think block in the prompt, so only the close appears.
    assert final_text("reasoning here</think>\nanswer") == "\nanswer"


# ---------------------------------------------------------------- fuzzing

FRAGMENTS = st.sampled_from([
    "<think>", "</think>", "### Problem", "**Problem:**", "Problem:", "## Solution", "```", "[", "]", "\"", "'",
    ",", "{", "}", "Verdict:", "perfect", "bad", "\n", "1. ", "- ", "**", "\\boxed{", " ", "x", "é", "\x00",
])
MODEL_LIKE = st.lists(st.one_of(FRAGMENTS, st.text(max_size=20)), max_size=60).map("".join)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), MODEL_LIKE))
def test_parsers_never_crash(text: str) -> None:
    concepts = parse_concepts(text, k=5)
    assert concepts is None or (0 < len(concepts) <= 5 and all(isinstance(c, str) and c for c in concepts))
    problem = parse_problem(text)
    assert problem is None or (isinstance(problem, str) and problem.strip())
    judgement = parse_judgement(text)
    assert judgement is None or judgement.verdict in ("perfect", "acceptable", "bad")
    statement, solution = split_solution(text)
    assert solution is None or statement.strip() or not text.strip()


@settings(max_examples=50, deadline=None)
@given(st.integers(min_value=1_000, max_value=50_000))
def test_parsers_handle_long_hostile_inputs(size: int) -> None:
    for text in ("[" * size, "\n" * size + "Verdict:", "### Problem\n" + "*" * size, "1. " + "a: " * size):
        parse_concepts(text)
        parse_problem(text)
        parse_judgement(text)
        split_solution(text)
