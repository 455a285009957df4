"""Cards of a world without its own truth (math) are labeled by a labeler's consistent samples."""

from __future__ import annotations

from sws.config import EngineConfig
from sws.consistency import TIED
from sws.cotrain.labeler import ConsistencyLabeler
from sws.cotrain.verify import CardVerifier
from sws.engines import Completion, Engine, Request
from sws.prompts import load_template
from sws.world import get_world

MATH = get_world("math")
NO_ANSWER = "I cannot finish this."
SUBJECTS = ["Algebra", "Counting & Probability", "Prealgebra"]


def boxed(answer: str) -> str:
    return f"Working it out.\nSo the answer is $\\boxed{{{answer}}}$."


class FixedAnswers(Engine):
    """Answers a problem (found by a word of its prompt) with its fixed list of samples; counts its calls."""

    name = "fixed"
    model = "fixed"

    def __init__(self, samples_by_word: dict[str, list[str]]) -> None:
        self.samples_by_word = samples_by_word
        self.calls: list[list[Request]] = []

    def generate(self, requests: list[Request]) -> list[list[Completion]]:
        self.calls.append(requests)
        return [[Completion(text) for text in self._samples(request)[:request.n]] for request in requests]

    def _samples(self, request: Request) -> list[str]:
        prompt = request.messages[-1]["content"]
        return next(samples for word, samples in self.samples_by_word.items() if word in prompt)

    def close(self) -> None:
        pass


def verifier(engine: FixedAnswers, samples: int = 4, min_consistency: float = 0.5) -> CardVerifier:
    labeler = ConsistencyLabeler(engine, EngineConfig(engine="openai", model="labeler"),
                                 load_template("label", None, "math"), samples, min_consistency, MATH.verifier, 0)
    return CardVerifier(labeler, [], SUBJECTS, labeler.verifier)


def card(problem: str, answer: str | None = None, category: str | None = None) -> str:
    lines = [f"problem: {problem}"]
    lines += [f"answer: {answer}"] if answer is not None else []
    lines += [f"category: {category}"] if category is not None else []
    return "\n".join(lines)


def test_the_label_is_the_majority_answer_and_its_consistency_the_reliability():
    engine = FixedAnswers({"apples": [boxed("0.5"), boxed("\\frac{1}{2}"), boxed("1/2"), boxed("3")]})
    verdict, = verifier(engine).verify_batch([card("What share of the apples is red, if half are?", "2",
                                                   "Prealgebra")])
    assert verdict.valid and verdict.answer in {"0.5", "\\frac{1}{2}", "1/2"}
    assert (verdict.reliability, verdict.category, verdict.synth_answer) == (0.75, "Prealgebra", "2")


def test_the_synthesizers_answer_is_audited_never_the_label():
    engine = FixedAnswers({"pears": [boxed("12")] * 4, "plums": [boxed("7")] * 4})
    agreeing, disagreeing, silent = verifier(engine).verify_batch([
        card("How many pears are in three boxes of four pears?", "12"),
        card("How many plums are left if 9 of 16 plums are eaten?", "8"),
        card("How many pears are in two boxes of six pears each?")])
    assert (agreeing.answer, agreeing.synth_agrees) == ("12", True)
    assert (disagreeing.answer, disagreeing.synth_answer, disagreeing.synth_agrees) == ("7", "8", False)
    assert disagreeing.valid and disagreeing.reliability == 1.0
    assert silent.valid and silent.synth_agrees is None


def test_refused_labels_are_rejected_with_the_label_steps_reasons():
    engine = FixedAnswers({
        "split": [boxed("4"), boxed("4"), boxed("5"), boxed("5")],
        "scattered": [boxed("1"), boxed("1"), boxed("2"), NO_ANSWER],
        "hopeless": [NO_ANSWER] * 4,
    })
    verdicts = verifier(engine, min_consistency=0.75).verify_batch([card(f"Find the {word} number of this puzzle, please.", "4")
                                                                    for word in ("split", "scattered", "hopeless")])
    assert [v.reject_reason for v in verdicts] == [TIED, "low_consistency", "no_answer"]
    assert all(v.answer is None and v.reliability == 0.0 for v in verdicts)


def test_a_batch_is_labeled_in_one_engine_call_that_asks_only_for_cards_past_the_checks():
    engine = FixedAnswers({"boxes": [boxed("9")] * 4, "crates": [boxed("6")] * 4})
    verdicts = verifier(engine, samples=4).verify_batch([
        card("How many boxes fit on a shelf of nine places?"),
        card("How many boxes fit on a shelf of nine places?"),
        "no card here",
        card("How many crates fit on two shelves of three places?"),
    ])
    assert [v.reject_reason for v in verdicts] == [None, "duplicate", "no_problem", None]
    [requests] = engine.calls
    assert len(requests) == 2 and all(request.n == 4 for request in requests)


def test_a_label_is_asked_for_again_with_the_same_seed():
    engine = FixedAnswers({"boxes": [boxed("9")] * 4})
    problem = card("How many boxes fit on a shelf of nine places?")
    verifier(engine).verify_batch([problem])
    verifier(engine).verify_batch([problem])
    first, second = (call[0] for call in engine.calls)
    assert first.seed == second.seed and first.messages == second.messages


def test_a_cards_category_is_read_as_one_of_the_runs_or_left_unset():
    engine = FixedAnswers({"marbles": [boxed("3")] * 4})
    written = ["counting and probability", " ALGEBRA ", "Counting", "Calculus", None]
    verdicts = verifier(engine).verify_batch([card(f"How many marbles are left in bag {i} of the shelf?", "3", c)
                                              for i, c in enumerate(written)])
    assert all(verdict.valid for verdict in verdicts)  # a category that names none of the run's costs no card
    assert [verdict.category for verdict in verdicts] == [
        "Counting & Probability", "Algebra", "Counting & Probability", None, None]


def test_a_solution_makes_the_reliability_its_agreement_with_the_consistent_label():
    engine = FixedAnswers({"apples": [boxed("0.5")] * 3 + [boxed("3")], "pears": [boxed("12")] * 4})
    agreeing, disagreeing = verifier(engine).verify_batch([
        card("What share of the apples is red, if half are?") + "\nsolution: half is \\boxed{\\frac{1}{2}}",
        card("How many pears are in three boxes of four pears?") + "\nsolution: 3 + 4 = \\boxed{7}"])
    assert (agreeing.answer, agreeing.solution_answer, agreeing.reliability) == ("0.5", "\\frac{1}{2}", 1.0)
    assert (disagreeing.answer, disagreeing.solution_answer, disagreeing.reliability) == ("12", "7", 0.0)
