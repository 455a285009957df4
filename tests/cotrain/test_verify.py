from sws.cotrain.verify import CardVerifier
from sws.world import get_world


def cards(benchmarks: list[str]) -> CardVerifier:
    return CardVerifier(get_world("arith").truth, benchmarks, [])


def _reasons(verdicts):
    return [v.reject_reason for v in verdicts]


def test_label_comes_from_the_truth_and_the_synthesizers_answer_is_audited():
    wrong, right = cards([]).verify_batch(["problem: Compute 47 + 85.\nanswer: 131",
                                              "problem: Compute 6 * 7.\nanswer: 42"])
    assert (wrong.valid, wrong.answer, wrong.synth_answer, wrong.reliability) == (True, "132", "131", 0.0)
    assert (right.answer, right.reliability, right.category) == ("42", 1.0, "multiplication")


def test_zero_answer_is_accepted_and_audited():
    verdict, = cards([]).verify_batch(["problem: Compute 5 - 5.\nfinal_answer: 0"])
    assert verdict.valid and verdict.reliability == 1.0


def test_duplicates_within_the_batch_and_against_recent_tasks_are_rejected():
    verifier = cards([])
    assert _reasons(verifier.verify_batch(["problem: Compute 3 + 4.", "problem: compute 3+4 ."])) == [
        None, "duplicate"]
    assert _reasons(verifier.verify_batch(["problem: Compute 3 + 4."])) == ["duplicate"]


def test_benchmark_names_match_on_word_boundaries_only():
    verdicts = cards([]).verify_batch(["problem: Compute 12 + 9, as claimed.",
                                          "problem: Compute 12 + 8 from AIME."])
    assert _reasons(verdicts)[1] == "contaminated"
    assert verdicts[0].reject_reason != "contaminated"


def test_benchmark_texts_are_rejected():
    verdict, = cards(["Compute 91 * 7."]).verify_batch(["problem: compute 91*7."])
    assert verdict.reject_reason == "contaminated"


def test_unparsable_and_prefiltered_cards_get_reason_codes():
    reasons = _reasons(cards([]).verify_batch(["no card here", "problem: Prove that 2 + 2 = 4."]))
    assert reasons[0] == "no_problem" and reasons[1] is not None
