"""Pre-filters for generated problems: cheap text rules that reject problems unfit for verifiable-reward RL.

Each rule is a named detector; `prefilter_reason` applies them in a fixed order and returns the first that
fires as the reject reason. The detectors look for the surface forms real generators use (a worked solution
left in the text, answer choices, "(a) … (b) …" parts or a list of sub-tasks, "prove that", "true or false", an
appended answer or a hint on how to solve it), and are kept narrow enough that ordinary competition problems
pass (on MATH train + MATH-500 they flag under 2 % of problems besides the over-long ones, most of them genuine
multiple-choice items).
`solution_leak` comes first: a problem that still carries worked steps usually also ends in its answer, and
its reason should say that the solution, not just the answer, is in the text.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from sws.text_hygiene import REJECT_REASON as HOSTILE_REASON
from sws.text_hygiene import hostile_character

TOKEN = re.compile(r"\w+|[^\w\s]")
# Asymptote figure code is not prose: "dot(A); dot(B);" are no answer choices.
_FIGURE_CODE = re.compile(r"\[asy\].*?\[/asy\]", re.S)
# Where a sentence or clause starts: the text start, or after closing punctuation.
_START = r"(?:^|(?<=[.?!:;])\s*|\n\s*)"

# Choice labels: "(A)", "\textbf{(A)}", " A)", or "A." at a line start.
_CHOICE_LABEL = re.compile(r"(?<![\w\\])\(\s*([A-E])\s*\)|\\textbf\{\(([A-E])\)\}|(?:^|\s)([A-E])\)|(?m:^\s*([A-E])\.\s)")
_CHOICE_PHRASES = re.compile(
    r"\bwhich of the following\b|\b(?:choose|select|pick) (?:one|the correct (?:answer|option))\s*:|"
    r"\banswer choices\b|\b(?:options|choices)\s*:",
    re.I,
)
# Part labels "(a) … (b)" (not "f(a)"), or "a) …" at a line start. Roman "(i) (ii)" usually list conditions.
_PART_LABEL = re.compile(r"(?<![\w\\])\(\s*([a-h])\s*\)\s*\S|(?m:^\s*([a-h])[.)]\s+\S)")
_PART_WORDS = re.compile(
    rf"\bpart\s*\(?[a-h1-9]\)?\s*[:.)]|\bbonus\s*:|{_START}then\s*,?\s*(?:find|compute|calculate|determine|evaluate)\b|"
    r"\b(?:also|additionally|as well)\s*,?\s*(?:find|compute|calculate|determine|evaluate|give|state)\b",
    re.I,
)
# "Compute 47+85 and 12*3": one request for two numeric expressions.
_NUMERIC_TERM = r"[\d(](?:[\d\s+\-*/×÷^()]*[\d)])?(?:\s+mod\s+[\d(](?:[\d\s+\-*()]*[\d)])?)?"
_TWO_EXPRESSIONS = re.compile(
    rf"\b(?:compute|calculate|evaluate)\s+\$?{_NUMERIC_TERM}\$?\s*,?\s+(?:and|&)\s+\$?{_NUMERIC_TERM}", re.I
)
# A sentence ends at . ? ! followed by a capital ("8! + 8" is a factorial, not a sentence end).
_SENTENCE_BREAK = re.compile(r"(?<=[.?!])\s+(?=[A-Z(])")
_ASKING_START = re.compile(
    r"\W*(?:(?:question|problem|task)\b\W*)?(?:(?:then|also|next|finally)\s*,?\s*)?"
    r"(?:what|which|how|find|compute|calculate|evaluate|determine|simplify)\b",
    re.I,
)
_ASKING_VERB = r"(?:find|calculate|compute|determine|evaluate|verify|check|show|prove|express|simplify|solve|what|how|which)"
# A list of sub-tasks: list items ("1. Calculate ...", "- Find ...") that each ask for something.
_TASK_ITEM = re.compile(rf"(?m:^\s*(?:\d+[.)]|[-*•])\s+(?:\*\*)?{_ASKING_VERB}\b)", re.I)
# "Determine the length of the field and the area used by each crop": one request for two quantities. (Operations
# on two things, "the sum of the number and its reverse", take one answer and are left out.)
_QUANTITY = (r"(?:length|width|height|area|perimeter|volume|radius|diameter|coordinates|values?|mean|median|slope|"
             r"distance|angle|measure|speed|time|cost|price)")
_TWO_QUANTITIES = re.compile(
    rf"\b(?:find|determine|calculate|compute|what (?:is|are))\s+(?:both\s+)?the\s+{_QUANTITY}\b[^.?!;$\\]{{0,60}}?"
    rf"\s+and\s+(?:the\s+)?{_QUANTITY}\b",
    re.I,
)
_PROOF = re.compile(
    rf"\b(?:prove|disprove)\b|\b(?:give|write) a proof\b|"
    rf"{_START}(?:show|demonstrate|explain|justify) (?:that|why|how)\b",
    re.I,
)
_TRUE_FALSE = re.compile(
    rf"\btrue\s*(?:or|/)\s*false\b|\bfalse\s*(?:or|/)\s*true\b|\byes\s*(?:or|/)\s*no\b|"
    rf"{_START}(?:is it|is this|is the (?:statement|claim|following)[^.?]*)\s+(?:true|correct|valid)\b|"
    rf"\b(?:determine|decide|state) (?:whether|if)\b[^.?]*\b(?:is|are) (?:true|false|correct|valid)\b",
    re.I,
)
# A yes/no question: the last sentence opens with a capitalised auxiliary verb ("Is 91 prime?").
_YES_NO_QUESTION = re.compile(r"(?:^|[.?]\s+)(?:Is|Are|Does|Do|Can|Could|Will|Would|Has|Have|Was|Were)\s[^.?!]*\?\s*$")
_ANSWER_LEAK = re.compile(
    r"\\boxed\b|\\fbox\b|(?m:^\s*(?:\*\*)?(?:final\s+)?(?:answer|solution)\s*(?:\*\*)?\s*:)|"
    # an appended last sentence that states the answer or the result
    r"(?:^|[.?!]\s+)\(?(?:the\s+)?(?:final\s+|correct\s+)?(?:answer|result)\s*(?:is|:|=)[^.?!]*[.!]?\)?\s*$|"
    r"\bhint\s*:[^\n]*\b(?:answer|result)\s+(?:is|equals|=)|"
    # "Compute 47+85 = 132.": a purely numeric expression to evaluate, followed by its value.
    r"\b(?:compute|calculate|evaluate|simplify)\s+[\d\s+\-*/×÷^().]+(?:mod\s+[\d\s()]+)?=\s*-?\d",
    re.I,
)

# How to solve it, which a problem must not say: "To solve this, first determine ...", "Solve it by: 1. ...",
# "Hint: use ...", "You will need to use ...". None occurs in MATH train + MATH-500.
_SOLUTION_HINT = re.compile(
    r"\bto solve (?:this|it)\b|\bsolve (?:it|this)(?: problem)? by\b|\bhint\s*:|"
    r"(?:^|[.?!:;,]\s*|\n\s*)(?:first|start by|begin by)\s+(?:determin|find|comput|calculat|us)\w*|"
    r"\byou (?:will |may |might )?(?:need|should|can) (?:to )?(?:first|use|apply|start|consider)\b",
    re.I,
)

# Worked steps, from what real models write after their problem: the prose of a solution ("To solve this
# problem, we need to…", "Substituting…"), numbered "Step 1" markers, a chain of equalities that ends in a
# number ("= 25 + 1 = 26"), and a concluding "Therefore, the value … is". Phrases that competition problems
# use too ("we get", "we obtain", "Thus the top row…") are left out (measured on MATH train + MATH-500).
_SOLVING_PROSE = re.compile(
    r"\bto solve (?:this|the) problem\b|\bwe need to (?:find|determine|calculate|compute|solve|use|follow|"
    r"evaluate|simplify|analy[sz]e)\b|\blet's (?:solve|start|begin|break|calculate|compute|find|simplify|"
    r"go through|first)\b|\blet us (?:solve|compute|calculate|find)\b|\bsubstituting\b|\bplugging (?:in|into)\b|"
    r"\bthis gives us\b|\bsimplifying,",
    re.I,
)
_STEP_MARKER = re.compile(r"(?m:^\s*(?:#+\s*)?(?:\*\*)?\s*step\s*1\s*(?:[:.)]|\*\*))|\bstep[- ]by[- ]step\b", re.I)
# "= <numbers and operators, no variables> = <number>" inside one formula.
_EQUALITY_CHAIN = re.compile(
    r"(?<![!<>])=(?P<middle>[^=\n$<>]{1,80})=\s*-?\d[\d,]*(?:\.\d+)?\s*(?:\\\]|\\\)|\$|[.,]?\s*$)", re.M)
_LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")
_CONCLUSION = re.compile(r"\b(?:therefore|thus|hence),\s+(?:the|we|its)\b[^.?!\n]*\b(?:is|are|equals|=|get)\b", re.I)


def _has_equality_chain(text: str) -> bool:
    for match in _EQUALITY_CHAIN.finditer(text):
        middle = _LATEX_COMMAND.sub(" ", match.group("middle"))
        if re.search(r"\d", middle) and not re.search(r"[A-Za-z]|\\[\[\]]", middle):
            return True
    return False


def token_count(text: str) -> int:
    """Words and punctuation marks: a tokenizer-free estimate that errs high against BPE vocabularies."""
    return len(TOKEN.findall(text))


def _labels(pattern: re.Pattern[str], text: str) -> set[str]:
    return {next(group for group in match.groups() if group) for match in pattern.finditer(text)}


def is_multiple_choice(problem: str) -> bool:
    return {"A", "B"} <= _labels(_CHOICE_LABEL, problem) or bool(_CHOICE_PHRASES.search(problem))


def question_count(problem: str) -> int:
    """Sentences that ask for something: ending in '?' or opening with what/how/find/compute/…"""
    sentences = _SENTENCE_BREAK.split(problem.strip())
    return sum(1 for sentence in sentences if sentence.endswith("?") or _ASKING_START.match(sentence))


def is_multi_part(problem: str) -> bool:
    return (
        len(_labels(_PART_LABEL, problem)) >= 2
        or bool(_PART_WORDS.search(problem))
        or bool(_TWO_EXPRESSIONS.search(problem))
        or bool(_TWO_QUANTITIES.search(problem))
        or len(_TASK_ITEM.findall(problem)) >= 2
        or question_count(problem) >= 2
    )


def is_proof(problem: str) -> bool:
    return bool(_PROOF.search(problem))


def is_true_false(problem: str) -> bool:
    return bool(_TRUE_FALSE.search(problem) or _YES_NO_QUESTION.search(problem.strip()))


def leaks_answer(problem: str) -> bool:
    """Whether the text states its answer or a hint on how to get it."""
    return bool(_ANSWER_LEAK.search(problem.strip()) or _SOLUTION_HINT.search(problem))


# The parts of the solution_leak rule, by name, so their precision and recall can be measured one by one.
SOLUTION_SIGNS: dict[str, Callable[[str], bool]] = {
    "solving_prose": lambda text: bool(_SOLVING_PROSE.search(text)),
    "step_marker": lambda text: bool(_STEP_MARKER.search(text)),
    "equality_chain": _has_equality_chain,
    "conclusion": lambda text: bool(_CONCLUSION.search(text)),
}


def shows_solution(problem: str) -> bool:
    """Whether the text still shows worked steps or a solution's conclusion."""
    return any(sign(problem) for sign in SOLUTION_SIGNS.values())


# In the order they are applied; the first detector that fires names the reject reason.
DEFECT_DETECTORS: dict[str, Callable[[str], bool]] = {
    "solution_leak": shows_solution,
    "answer_leak": leaks_answer,
    "multiple_choice": is_multiple_choice,
    "true_false": is_true_false,
    "proof": is_proof,
    "multi_part": is_multi_part,
}


# A generator that declines the request instead of writing a problem (the arith oracle for a concept set no
# problem shows; a model that apologises).
_REFUSAL = re.compile(r"\bI\s+(?:cannot|can['’]t|can not|am unable to)\b|\bI['’]m (?:sorry|unable to)\b", re.IGNORECASE)


def refuses(text: str) -> bool:
    return bool(_REFUSAL.search(text))


def prefilter_reason(problem: str | None, min_chars: int, max_tokens: int) -> str | None:
    """Why a parsed problem is rejected before any judge sees it, or None to keep it."""
    if problem is None:
        return "unparsed"
    if hostile_character(problem):
        return HOSTILE_REASON
    if len(problem.strip()) < min_chars:
        return "too_short"
    if token_count(problem) > max_tokens:
        return "too_long"
    prose = _FIGURE_CODE.sub(" ", problem)
    return next((reason for reason, detects in DEFECT_DETECTORS.items() if detects(prose)), None)
