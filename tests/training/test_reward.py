from types import SimpleNamespace

import pytest

from sws import grading
from sws.training.reward import CorrectnessReward, completion_text, grade_completions
from sws.training.rollout_log import RolloutLog


def test_integer_answers_are_compared_as_numbers():
    answers = ["12", "12", "-7", "40", "5"]
    completions = ["\\boxed{12}", "\\boxed{13}", "\\boxed{-07}", "so \\boxed{+40}", "5"]

    assert grade_completions(answers, completions) == [True, False, True, True, False]


def test_a_completion_without_a_final_answer_is_wrong():
    assert grade_completions(["3", "3"], ["\\boxed{", ""]) == [False, False]


def test_non_integer_answers_are_graded_by_equivalence():
    answers = ["\\frac{1}{2}", "\\frac{1}{2}", "x^2+1"]
    completions = ["\\boxed{0.5}", "\\boxed{\\frac{1}{3}}", "The answer is \\boxed{1 + x^2}."]

    assert grade_completions(answers, completions) == [True, False, True]


def test_a_completion_graded_past_the_deadline_is_ungraded_not_wrong(impatient_pool, slow_to_grade):
    completions = [f"\\boxed{{{slow_to_grade}}}", "no answer at all", "\\boxed{\\frac{8}{2}}"]

    assert grade_completions(["2", "3", "4"], completions, impatient_pool) == [None, False, True]


def test_chat_completions_are_read_as_their_message_text():
    assert completion_text([{"role": "assistant", "content": "\\boxed{4}"}]) == "\\boxed{4}"
    assert completion_text("\\boxed{4}") == "\\boxed{4}"


def test_reward_logs_one_row_per_rollout_group_under_the_step_it_feeds(tmp_path):
    log = RolloutLog(tmp_path / "rollouts")
    reward = CorrectnessReward(log, group_size=3)
    completions = ["\\boxed{2}", "\\boxed{3}", "\\boxed{2}", "\\boxed{9}", "\\boxed{9}", "\\boxed{9}"]

    rewards = reward(
        prompts=["1+1\n"] * 3 + ["3*3\n"] * 3, completions=completions,
        answer=["2"] * 3 + ["9"] * 3, problem_id=["a"] * 3 + ["b"] * 3,
        trainer_state=SimpleNamespace(global_step=4, is_world_process_zero=True),
    )
    log.flush()

    assert rewards == [1.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    assert log.table().rows() == [(5, "a", 3, 2, False), (5, "b", 3, 3, False)]


def test_a_group_split_between_device_slices_is_logged_as_one_row(tmp_path):
    # Two processes' slices, gathered in process order: each holds part of each group.
    log = RolloutLog(tmp_path / "rollouts")
    reward = CorrectnessReward(log, group_size=2)

    reward(prompts=["x"] * 4, completions=["\\boxed{1}", "\\boxed{2}", "\\boxed{1}", "\\boxed{2}"],
           answer=["1", "2", "1", "2"], problem_id=["a", "b", "a", "b"],
           trainer_state=SimpleNamespace(global_step=0, is_world_process_zero=True))
    log.flush()

    assert log.table().rows() == [(1, "a", 2, 2, False), (1, "b", 2, 2, False)]


def test_an_ungraded_completion_gets_no_reward_and_no_place_in_its_groups_n(
    tmp_path, monkeypatch, impatient_pool, slow_to_grade,
):
    monkeypatch.setattr(grading, "shared_pool", lambda *_: impatient_pool)
    log = RolloutLog(tmp_path / "rollouts")
    slow = f"\\boxed{{{slow_to_grade}}}"

    rewards = CorrectnessReward(log, group_size=2)(
        prompts=["x"] * 4, completions=["\\boxed{1}", slow, slow, slow], answer=["1", "1", "2", "2"],
        problem_id=["a", "a", "b", "b"], trainer_state=SimpleNamespace(global_step=0, is_world_process_zero=True))
    log.flush()

    assert rewards == [1.0, 0.0, 0.0, 0.0]
    assert log.table().rows() == [(1, "a", 1, 1, False)]  # b: nothing graded, so no accuracy to log


def test_only_the_main_process_logs_rollouts(tmp_path):
    log = RolloutLog(tmp_path / "rollouts")
    rewards = CorrectnessReward(log, group_size=2)(
        prompts=["x"] * 2, completions=["\\boxed{1}", "\\boxed{3}"], answer=["1", "1"], problem_id=["a", "a"],
        trainer_state=SimpleNamespace(global_step=0, is_world_process_zero=False))
    log.flush()

    assert rewards == [1.0, 0.0] and log.table().height == 0


def test_reward_refuses_a_batch_that_is_not_whole_groups(tmp_path):
    reward = CorrectnessReward(RolloutLog(tmp_path / "rollouts"), group_size=2)

    with pytest.raises(RuntimeError, match="problem a has 1 completions in a step, not one group of 2"):
        reward(prompts=["x"] * 2, completions=["\\boxed{1}"] * 2, answer=["1", "1"], problem_id=["a", "b"],
               trainer_state=SimpleNamespace(global_step=0, is_world_process_zero=True))


def test_a_band_drops_groups_outside_it_and_the_log_says_which(tmp_path):
    log = RolloutLog(tmp_path / "rollouts")
    reward = CorrectnessReward(log, group_size=4, band=(0.125, 0.875))
    answers = ["1"] * 4 + ["2"] * 4 + ["3"] * 4
    completions = ["\\boxed{1}", "\\boxed{0}", "\\boxed{0}", "\\boxed{0}"] + ["\\boxed{2}"] * 4 + ["\\boxed{0}"] * 4

    rewards = reward(prompts=["x"] * 12, completions=completions, answer=answers,
                     problem_id=["a"] * 4 + ["b"] * 4 + ["c"] * 4,
                     trainer_state=SimpleNamespace(global_step=0, is_world_process_zero=True))
    log.flush()

    assert rewards == [1.0, 0.0, 0.0, 0.0] + [1.0] * 4 + [0.0] * 4  # the reward itself is unchanged
    assert reward.dropped == {"b", "c"}
    assert log.table().rows() == [(1, "a", 4, 1, False), (1, "b", 4, 4, True), (1, "c", 4, 0, True)]
