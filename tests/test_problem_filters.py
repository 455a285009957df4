from __future__ import annotations

import json

import pytest

from sws.problem_filters import prefilter_reason, token_count
from sws.records import DATA_DIR as DATA


def reason(problem: str | None) -> str | None:
    return prefilter_reason(problem, min_chars=10, max_tokens=400)


@pytest.mark.parametrize(
    ("problem", "expected"),
    [
        ("Compute 47+85. The answer is 132.", "answer_leak"),
        ("Compute 47+85. (Hint: the result is 132.)", "answer_leak"),
        ("Compute 47+85 = 132.", "answer_leak"),
        ("Find the area of a 3 by 4 rectangle.\nAnswer: 12", "answer_leak"),
        ("Solve $x+1=3$. The final answer is $\\boxed{2}$.", "answer_leak"),
        ("What is $7 \\times 8$?\n\nSolution: $7 \\times 8 = 56$.", "answer_leak"),
        ("Compute 3+4. Options: (A) 5 (B) 7 (C) 8 (D) 9", "multiple_choice"),
        ("What is $2^{10}$?\n$\\textbf{(A)}\\ 512 \\qquad \\textbf{(B)}\\ 1024 \\qquad \\textbf{(C)}\\ 2048$",
         "multiple_choice"),
        ("Which of the following is a prime number: 21, 27, 29, 33?", "multiple_choice"),
        ("True or false: 91 is a prime number.", "true_false"),
        ("Is it true that 17*3 = 51?", "true_false"),
        ("Is 2^{31}-1 a prime number?", "true_false"),
        ("Determine whether the statement 'every even number is a sum of two primes' is true.", "true_false"),
        ("Prove that the sum of two odd integers is even.", "proof"),
        ("Show that $n^3 - n$ is divisible by 6 for every integer $n$.", "proof"),
        ("(a) Compute 12*13. (b) Compute 12*14.", "multi_part"),
        ("Compute 47+85. Then compute 47*85.", "multi_part"),
        ("Compute 47+85 and 12*3.", "multi_part"),
        ("Find the mean of 3, 5 and 10. Also find their median.", "multi_part"),
        ("What is 15% of 80? What is 20% of 80?", "multi_part"),
        ("Let f(x) = 2x + 1.\na) Find f(3).\nb) Find f(f(3)).", "multi_part"),
        # What a 1.5B generator wrote in a live run: a hint on how to solve it, a list of sub-tasks, two results.
        ("Find the remainder when $2^{100}$ is divided by 7. To solve this, first determine the remainder when "
         "$2^3$ is divided by 7.", "answer_leak"),
        ("What is $3^{20}$ modulo 5? Hint: use Fermat's little theorem.", "answer_leak"),
        ("Find the area of a triangle with sides 13, 14 and 15. You will need to use Heron's formula.",
         "answer_leak"),
        ("Evaluate $(1 + \\sqrt{2})^3$.\n\nSolve it by:\n1. Expanding the cube.\n2. Simplifying.", "answer_leak"),
        ("Let $a = (1, 2, 3)$ and $b = (-4, 5, 6)$.\n1. Calculate the magnitude of $a$.\n2. Find the dot product "
         "of $a$ and $b$.", "multi_part"),
        ("A field has an area of 300 square meters and a width of 15 meters. Determine the length of the field and "
         "the area used by each of two crops that share it equally.", "multi_part"),
        ("**Question:** Find the product of two two-digit numbers whose digits are all odd. What are the possible "
         "values of the first number?", "multi_part"),
        ("Hi.", "too_short"),
        (None, "unparsed"),
        ("Compute " + "+".join(["1"] * 300) + ".", "too_long"),
    ],
)
def test_defective_problems_are_rejected_with_their_reason(problem: str | None, expected: str) -> None:
    assert reason(problem) == expected


@pytest.mark.parametrize(
    "problem",
    [
        "Compute 2+5.",
        "Compute 661 mod 8.",
        "Compute (5-1)*3.",
        "Compute 37+13-40+33+46.",
        "What is the remainder when 2024 is divided by 7?",
        "If x+y=5 and x-y=1, find x.",
        "Find the sum of 3 and 4.",
        "A store sells 12 apples and 7 pears each day. How many fruits does it sell in 5 days?",
        "Let $f(x) = x^2 + 3x$. What is $f(2)$?",
        "The function satisfies $b^2 f(a) = a^2 f(b)$ for all real $a$ and $b$. If $f(2) \\neq 0$, find $f(5)/f(2)$.",
        "What is the units digit of $1! + 2! + 3! + \\cdots + 9!$?",
        "Let $S$ be the set of integers with (i) $s > 0$ and (ii) $s < 10$. How many elements does $S$ have?",
        "When the square root of $x$ is cubed, the answer is 64. What is the value of $x$?",
        "Every year the number of wrens decreases by 40%. In what year will the census show that it is below 10%?",
        "Following the arrows, how many paths go from $A$ to $C$? [asy] dot(A); dot(B); dot(C); [/asy]",
        # Near the new multi_part and answer_leak rules, from MATH: one answer each, no hint.
        "Find the product of the greatest common divisor and the least common multiple of $100$ and $120.$",
        "What is the sum of the original number and the number with its digits reversed?",
        "Simplify $\\sqrt{28x}$.\n\nNote: When entering a square root with more than one character, you must use "
        "parentheses or brackets.",
        "On a game show a contestant guesses three prices. As a hint, the digits of the three prices are given.",
    ],
)
def test_well_formed_problems_pass(problem: str) -> None:
    assert reason(problem) is None


def test_few_benchmark_problems_are_flagged() -> None:
    problems = [row["problem"] for row in json.loads((DATA / "math500.json").read_text())]
    flagged = [problem for problem in problems if reason(problem) not in (None, "too_long")]
    assert len(flagged) / len(problems) < 0.03


def test_token_count_counts_words_and_symbols() -> None:
    assert token_count("Compute 47+85.") == 5
