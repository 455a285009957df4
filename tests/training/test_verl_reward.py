from sws.training.verl_reward import compute_score


def test_a_correct_response_scores_one_and_names_its_problem():
    result = compute_score("arith", "7*6 = 42, so \\boxed{42}", "42", {"problem_id": "p-17", "index": 3})

    assert result == {"score": 1.0, "acc": True, "problem_id": "p-17"}


def test_a_wrong_or_unanswered_response_scores_zero():
    assert compute_score("arith", "\\boxed{41}", "42")["score"] == 0.0
    assert compute_score("math", "I am not sure.", "\\frac{1}{2}", None) == {
        "score": 0.0, "acc": False, "problem_id": "",
    }
