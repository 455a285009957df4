from sws.cotrain.verify import CardVerifier
from sws.world import get_world


def cards(benchmarks: list[str], require_solution: bool = False) -> CardVerifier:
    arith = get_world("arith")
    return CardVerifier(arith.truth, benchmarks, [], arith.verifier, require_solution=require_solution)


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


def test_a_cards_solution_makes_its_reliability_whether_the_solutions_final_answer_is_the_truth():
    agreeing, disagreeing, answerless = cards([]).verify_batch([
        "problem: Compute 47 + 85.\nsolution: 47 + 85 = 132, so \\boxed{132}.",
        "problem: Compute 6 * 7.\nsolution: 6 * 7 = 48, so \\boxed{48}.\nanswer: 42",
        "problem: Compute 9 - 3.\nsolution: take three away\nfrom nine.\nanswer: 6"])
    assert (agreeing.solution_answer, agreeing.synth_answer, agreeing.reliability) == ("132", None, 1.0)
    # the answer line is right, the solution is not: SynCo's reliability is the solution's
    assert (disagreeing.solution_answer, disagreeing.synth_agrees, disagreeing.reliability) == ("48", True, 0.0)
    assert (answerless.solution, answerless.solution_answer, answerless.reliability) == (
        "take three away\nfrom nine.", None, 0.0)
    assert all(verdict.valid and verdict.answer for verdict in (agreeing, disagreeing, answerless))


def test_a_card_without_a_solution_where_one_is_required_is_rejected():
    without, with_one = cards([], require_solution=True).verify_batch([
        "problem: Compute 47 + 85.\nanswer: 132", "problem: Compute 6 * 7.\nsolution: \\boxed{42}"])
    assert (without.reject_reason, without.answer, without.reliability) == ("no_solution", None, 0.0)
    assert with_one.valid and with_one.reliability == 1.0


def test_a_valid_cards_quality_is_one_because_no_judge_rates_it():
    valid, unreadable = cards([]).verify_batch(["problem: Compute 47 + 85.", "no card here"])
    assert (valid.quality, valid.quality_reason) == (1.0, "no_judge")
    assert (unreadable.quality, unreadable.quality_reason) == (0.0, None)
