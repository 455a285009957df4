"""Parsers and filters against what a real instruct model wrote for sws's prompts (tests/fixtures/teacher_outputs).

Every output is labeled by hand below. The test prints each rule's precision and recall (`pytest -s`) and holds
the rules to what they reach: every cut-off output rejected as `truncated` (a generation only when it was cut
off inside its problem: one cut off in the solution after its problem keeps the problem), every problem followed
by a worked solution cut there or rejected as `solution_leak`, no clean problem cut or flagged, every rubber-stamp
verdict discarded, and a label copied from a solution in the problem rejected as `copied_solution`. Every
generation made with the generate template's stop strings is kept or rejected as a reader would, and every
categorize reply gives the domain it names, while none a reader would reject (cut off, two domains, an unlisted
one, no summary) gives a label.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from _openai_server import MODEL, serving
from test_categorize import problem_of

from sws import runner
from sws.categorize import END_MARKER, Label, read_label
from sws.config import PipelineConfig
from sws.consistency import sample_answer, teacher_label
from sws.engines import Completion
from sws.grading import shared_pool
from sws.parsing import Judgement, split_solution
from sws.problem_filters import SOLUTION_SIGNS, shows_solution
from sws.records import DATA_DIR
from sws.stages import prepare
from sws.stages.generate import screen_generation
from sws.stages.label import copies_solution
from sws.stages.rate import TRUNCATED, read_judgement
from sws.tables import read_table
from sws.worlds.math.verifier import MathVerifier

FIXTURES = Path(__file__).parent / "fixtures" / "teacher_outputs"
MATH500 = DATA_DIR / "math500.json"


def recorded(name: str) -> list[dict]:
    return [json.loads(line) for line in (FIXTURES / f"qwen2.5-coder-1.5b-instruct{name}.jsonl").read_text().splitlines()]


ROWS = recorded("")
STOPS = recorded(".generate-stops")
CATEGORIZE = recorded(".categorize")
MATH = MathVerifier()

# Hand labels, by line index of the fixture.
GENERATIONS_WITH_SOLUTION = {3, 7, 19, 21, 27, 31}  # finished, and the problem is followed by its worked solution
CLEAN_GENERATIONS = {13, 15}  # finished, and nothing follows the problem
# Judge inputs (the text after the last `### Problem`, uncut) that carry a solution; 38 and 39 are clean problems.
JUDGE_PROBLEMS_WITH_SOLUTION = {32, 33, 34, 35, 36, 37, 40, 41, 42, 43, 44, 45, 46, 47}
USABLE_JUDGEMENTS = {38}  # the only reply with an analysis above its verdict; the rest are bare verdicts or none
# Labeler pairs (two samples of one problem) whose answer comes from the solution inside the problem.
COPIED_LABELS = {(50, 51), (54, 55)}
LABEL_PAIRS = [(48, 49), (50, 51), (52, 53), (54, 55), (56, 57), (58, 59), (60, 61), (62, 63)]


@dataclass
class Score:
    rule: str
    true_positive: int = 0
    false_positive: int = 0
    false_negative: int = 0

    def add(self, flagged: bool, positive: bool) -> None:
        self.true_positive += flagged and positive
        self.false_positive += flagged and not positive
        self.false_negative += positive and not flagged

    @property
    def precision(self) -> float:
        flagged = self.true_positive + self.false_positive
        return self.true_positive / flagged if flagged else 1.0

    @property
    def recall(self) -> float:
        positives = self.true_positive + self.false_negative
        return self.true_positive / positives if positives else 1.0

    def line(self) -> str:
        return (f"{self.rule:<48} precision {self.precision:5.2f}  recall {self.recall:5.2f}  "
                f"(tp {self.true_positive}, fp {self.false_positive}, fn {self.false_negative})")


def completion(row: dict) -> Completion:
    return Completion(row["output"], row["completion_tokens"], row["finish_reason"])


def indexed(role: str) -> list[tuple[int, dict]]:
    return [(index, row) for index, row in enumerate(ROWS) if row["role"] == role]


def clean_problems() -> list[str]:
    """Problems nobody appended anything to: the MATH problems put to the extractor, the clean generated ones,
    and MATH-500."""
    extracted = [row["values"]["problem"] for _, row in indexed("extractor")]
    judged = [row["values"]["problem"] for index, row in indexed("judge") if index not in JUDGE_PROBLEMS_WITH_SOLUTION]
    return extracted + judged + [item["problem"] for item in json.loads(MATH500.read_text())]


def score_rules() -> list[Score]:
    truncated = Score("truncated (extract, generate, rate)")
    kept_whole = Score("cut-off generation keeps its whole problem")
    no_answer = Score("cut-off labeler sample gives no answer")
    cut = Score("problem cut where its solution starts")
    leak = Score("solution_leak pre-filter (uncut text)")
    signs = {name: Score(f"  solution_leak sign: {name}") for name in SOLUTION_SIGNS}
    generation = Score("generation: solution cut off or solution_leak")
    judgement = Score("judgement discarded (no analysis / no verdict)")
    copied = Score("copied_solution")
    for _, row in indexed("extractor"):
        truncated.add(completion(row).truncated, row["finish_reason"] == "length")
    for index, row in indexed("generator"):
        problem, reason = screen_generation(completion(row), min_chars=10, max_tokens=400)
        ended = split_solution(row["output"].split("### Problem", 1)[1].strip())[1] is not None
        truncated.add(reason == "truncated", row["finish_reason"] == "length" and not ended)
        if row["finish_reason"] == "length" and ended:
            statement = split_solution(row["output"].split("### Problem", 1)[1].strip())[0]
            kept_whole.add(reason != "truncated" and problem is not None and problem.strip("*") in statement, True)
        if reason is None:  # what is kept shows no solution
            assert not shows_solution(problem), (index, problem)
        if row["finish_reason"] == "stop":
            body = row["output"].split("### Problem", 1)[1]
            was_cut = split_solution(body.strip())[1] is not None
            generation.add(was_cut or reason == "solution_leak", index in GENERATIONS_WITH_SOLUTION)
    for index, row in indexed("judge"):
        text, positive = row["values"]["problem"], index in JUDGE_PROBLEMS_WITH_SOLUTION
        cut.add(split_solution(text)[1] is not None, positive)
        leak.add(shows_solution(text), positive)
        for name, sign in SOLUTION_SIGNS.items():
            signs[name].add(sign(text), positive)
        read = read_judgement(completion(row))
        truncated.add(read == TRUNCATED, row["finish_reason"] == "length")
        judgement.add(not isinstance(read, Judgement), index not in USABLE_JUDGEMENTS)
    for text in clean_problems():
        cut.add(split_solution(text)[1] is not None, False)
        leak.add(shows_solution(text), False)
        for name, sign in SOLUTION_SIGNS.items():
            signs[name].add(sign(text), False)
    for _, row in indexed("labeler"):
        if row["finish_reason"] == "length":
            no_answer.add(sample_answer(completion(row), MATH) is None, True)
    for pair in LABEL_PAIRS:
        problem = ROWS[pair[0]]["values"]["problem"]
        answer, _, _ = teacher_label([sample_answer(completion(ROWS[index]), MATH) for index in pair], shared_pool(MATH))
        copied.add(copies_solution(answer, split_solution(problem)[1], MATH), pair in COPIED_LABELS)
    return [truncated, kept_whole, no_answer, generation, cut, leak, *signs.values(), judgement, copied]


@pytest.fixture(scope="module")
def scores() -> dict[str, Score]:
    measured = score_rules()
    print("\nrules on the recorded outputs of Qwen2.5-Coder-1.5B-Instruct (+ MATH-500 as clean problems):")
    for score in measured:
        print(score.line())
    return {score.rule: score for score in measured}


def test_every_cut_off_output_is_rejected_and_no_finished_one(scores) -> None:
    for rule in ("truncated (extract, generate, rate)", "cut-off labeler sample gives no answer"):
        assert (scores[rule].precision, scores[rule].recall) == (1.0, 1.0)


def test_a_generation_cut_off_after_its_problem_keeps_it_and_one_cut_inside_it_is_truncated(scores) -> None:
    assert scores["cut-off generation keeps its whole problem"].true_positive == 8
    assert scores["cut-off generation keeps its whole problem"].recall == 1.0
    for index, row in indexed("generator"):
        problem = row["output"].split("### Problem", 1)[1].strip()
        statement = split_solution(problem)[0]
        inside = Completion(row["output"][:row["output"].index(statement) + len(statement) // 2], 100, "length")
        assert screen_generation(inside, min_chars=10, max_tokens=400)[1] == "truncated", index


def test_every_worked_solution_is_cut_off_or_rejected_and_no_clean_problem_is_touched(scores) -> None:
    assert scores["generation: solution cut off or solution_leak"].recall == 1.0
    assert scores["problem cut where its solution starts"].recall == 1.0
    assert scores["problem cut where its solution starts"].precision == 1.0
    assert scores["solution_leak pre-filter (uncut text)"].recall == 1.0
    assert scores["solution_leak pre-filter (uncut text)"].precision >= 0.9


def test_clean_generated_problems_come_out_whole() -> None:
    for index in CLEAN_GENERATIONS:
        row = ROWS[index]
        problem, reason = screen_generation(completion(row), min_chars=10, max_tokens=400)
        assert problem == row["output"].split("### Problem", 1)[1].strip()
        assert reason not in ("truncated", "solution_leak", "answer_leak")
    # 15 is kept; 13 asks "Find all polynomials …" and then "How many …?", which the multi_part rule rejects.
    assert screen_generation(completion(ROWS[15]), 10, 400)[1] is None


def test_only_verdicts_below_an_analysis_count(scores) -> None:
    assert (scores["judgement discarded (no analysis / no verdict)"].precision,
            scores["judgement discarded (no analysis / no verdict)"].recall) == (1.0, 1.0)
    assert read_judgement(completion(ROWS[38])).verdict == "bad"


def test_labels_copied_from_the_problem_are_caught(scores) -> None:
    assert (scores["copied_solution"].precision, scores["copied_solution"].recall) == (1.0, 1.0)


# ---------------------------------------------------------------- generate, with the template's stop strings

# What a reader makes of each reply (by index): the reason it cannot be used, or None for a clean problem. 1 asks
# for a step-by-step solution, 2 writes `### Problem` twice, 3 asks for a length and two areas, 10 asks for a
# product and then for the possible values of a factor, 12 asks for six things. 6 and 7 were cut off in the
# solution that follows a whole problem.
STOPS_READING = {1: "solution_leak", 2: "unparsed", 3: "multi_part", 10: "multi_part", 12: "multi_part"}


def test_every_generation_with_stop_strings_is_kept_or_rejected_as_a_reader_would() -> None:
    for index, row in enumerate(STOPS):
        problem, reason = screen_generation(completion(row), min_chars=10, max_tokens=400)
        assert reason == STOPS_READING.get(index), (index, reason)
        if reason is None:  # the whole problem, and nothing after it
            assert problem.rstrip().endswith(("?", ".")) and problem in row["output"], index
            assert not shows_solution(problem), index


# ---------------------------------------------------------------- categorize

# The domain each reply names on its `Domain:` line, in the list's spelling (17 writes `Probability`).
CATEGORIZE_READING = [
    "Algebra", "Number Theory", "Geometry", "Number Theory", "Number Theory", "Geometry", "Geometry", "Geometry",
    "Number Theory", "Algebra", "Prealgebra", "Number Theory", "Counting & Probability", "Geometry", "Number Theory",
    "Geometry", "Number Theory", "Counting & Probability", "Geometry", "Algebra", "Algebra", "Number Theory",
    "Geometry", "Algebra", "Number Theory", "Geometry", "Geometry", "Geometry", "Number Theory",
    "Counting & Probability", "Number Theory", "Number Theory", "Prealgebra", "Geometry", "Geometry", "Algebra",
]


def categorize_read(row: dict, output: str | None = None, finish_reason: str | None = None) -> Label | str:
    text = row["output"] if output is None else output
    return read_label(Completion(text, row["completion_tokens"], finish_reason or row["finish_reason"]),
                      row["values"]["categories"])


def summary_line(output: str) -> str:
    return next(line for line in output.splitlines() if line.startswith("Summary:")).removeprefix("Summary:").strip()


def test_every_categorize_reply_gives_the_domain_it_names_and_its_summary() -> None:
    labels = [categorize_read(row) for row in CATEGORIZE]
    assert [label.category for label in labels] == CATEGORIZE_READING
    assert all(label.summary == summary_line(row["output"]) for label, row in zip(labels, CATEGORIZE, strict=True))
    agree = sum(label.category == row["math_subject"] for label, row in zip(labels, CATEGORIZE, strict=True))
    closed = sum(row["output"].rstrip().endswith(END_MARKER) for row in CATEGORIZE)
    print(f"\ncategorize replies of Qwen2.5-Coder-1.5B-Instruct: {len(labels)} of {len(CATEGORIZE)} labeled "
          f"({closed} end with {END_MARKER}), {agree} agree with MATH's subject")


@pytest.mark.parametrize(("spoil", "reason"), [
    (lambda output: output, "truncated"),  # the same text, cut off at max_tokens
    (lambda output: output + "\nDomain: Precalculus", "two_domains"),
    (lambda output: re.sub(r"(?m)^Domain: .*$", "Domain: Combinatorics", output), "unlisted_domain"),
    (lambda output: re.sub(r"(?m)^Domain: .*$", "Domain: Algebra or Geometry", output), "unlisted_domain"),
    (lambda output: re.sub(r"(?m)^Summary: .*$", "Summary:", output), "no_summary"),
])
def test_no_categorize_reply_a_reader_would_reject_gives_a_label(spoil, reason: str) -> None:
    finish_reason = "length" if reason == "truncated" else None
    assert {categorize_read(row, spoil(row["output"]), finish_reason) for row in CATEGORIZE} == {reason}


def test_prepare_labels_the_recorded_problems_from_the_recorded_replies(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")
    replies = {row["values"]["problem"]: row["output"] for row in CATEGORIZE}
    seed = tmp_path / "recorded.jsonl"
    seed.write_text("".join(json.dumps({"problem": problem, "answer": "1"}) + "\n" for problem in replies))
    with serving() as server:
        server.writer = lambda prompt, body: replies[problem_of(prompt)]
        role = {"engine": "openai", "model": MODEL, "temperature": 0.0, "options": {"base_url": server.base_url}}
        cfg = PipelineConfig.model_validate({"world": "math", "roles": {"categorizer": role},
                                             "prepare": {"input": str(seed), "categorize": True}})
        runner.run(prepare.STAGE, cfg, tmp_path / "run")
    labeled = read_table(tmp_path / "run", "problems").filter(pl.col("category_source") == "model")
    assert labeled.height >= 0.9 * len(replies)
    assert len(server.posts) == len(replies)  # no reply needed asking again
