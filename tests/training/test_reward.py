from types import SimpleNamespace

import pytest
from word_world import WordVerifier, shorter_is_better

from sws.training import reward as reward_module
from sws.training.reward import CorrectnessReward, completion_text
from sws.training.rewards import correct
from sws.training.rollout_log import RolloutLog
from sws.worlds.math.verifier import MathVerifier

MATH = MathVerifier()


def math_reward(log: RolloutLog, group_size: int, band: tuple[float, float] | None = None) -> CorrectnessReward:
    return CorrectnessReward(log, group_size, MATH, correct, "correct", band)


def test_chat_completions_are_read_as_their_message_text():
    assert completion_text([{"role": "assistant", "content": "\\boxed{4}"}]) == "\\boxed{4}"
    assert completion_text("\\boxed{4}") == "\\boxed{4}"


def test_reward_logs_one_row_per_rollout_group_under_the_step_it_feeds(tmp_path):
    log = RolloutLog(tmp_path / "rollouts")
    reward = math_reward(log, group_size=3)
    completions = ["\\boxed{2}", "\\boxed{3}", "\\boxed{2}", "\\boxed{9}", "\\boxed{9}", "\\boxed{9}"]

    rewards = reward(
        prompts=["1+1\n"] * 3 + ["3*3\n"] * 3, problem=["1+1\n"] * 3 + ["3*3\n"] * 3, completions=completions,
        answer=["2"] * 3 + ["9"] * 3, problem_id=["a"] * 3 + ["b"] * 3,
        trainer_state=SimpleNamespace(global_step=4, is_world_process_zero=True),
    )
    log.flush()

    assert rewards == [1.0, 0.0, 1.0, 1.0, 1.0, 1.0]
    assert log.table().rows() == [(5, "a", 3, 2, False), (5, "b", 3, 3, False)]


def test_a_group_split_between_device_slices_is_logged_as_one_row(tmp_path):
    # Two processes' slices, gathered in process order: each holds part of each group.
    log = RolloutLog(tmp_path / "rollouts")
    reward = math_reward(log, group_size=2)

    reward(prompts=["x"] * 4, problem=["x"] * 4, completions=["\\boxed{1}", "\\boxed{2}", "\\boxed{1}", "\\boxed{2}"],
           answer=["1", "2", "1", "2"], problem_id=["a", "b", "a", "b"],
           trainer_state=SimpleNamespace(global_step=0, is_world_process_zero=True))
    log.flush()

    assert log.table().rows() == [(1, "a", 2, 2, False), (1, "b", 2, 2, False)]


def test_an_ungraded_completion_gets_no_reward_and_no_place_in_its_groups_n(
    tmp_path, monkeypatch, impatient_pool, slow_to_grade,
):
    monkeypatch.setattr(reward_module, "shared_pool", lambda *_: impatient_pool)
    log = RolloutLog(tmp_path / "rollouts")
    slow = f"\\boxed{{{slow_to_grade}}}"

    rewards = math_reward(log, group_size=2)(
        prompts=["x"] * 4, problem=["x"] * 4, completions=["\\boxed{1}", slow, slow, slow], answer=["1", "1", "2", "2"],
        problem_id=["a", "a", "b", "b"], trainer_state=SimpleNamespace(global_step=0, is_world_process_zero=True))
    log.flush()

    assert rewards == [1.0, 0.0, 0.0, 0.0]
    assert log.table().rows() == [(1, "a", 1, 1, False)]  # b: nothing graded, so no accuracy to log


def test_only_the_main_process_logs_rollouts(tmp_path):
    log = RolloutLog(tmp_path / "rollouts")
    rewards = math_reward(log, group_size=2)(
        prompts=["x"] * 2, problem=["x"] * 2, completions=["\\boxed{1}", "\\boxed{3}"], answer=["1", "1"], problem_id=["a", "a"],
        trainer_state=SimpleNamespace(global_step=0, is_world_process_zero=False))
    log.flush()

    assert rewards == [1.0, 0.0] and log.table().height == 0


def test_reward_refuses_a_batch_that_is_not_whole_groups(tmp_path):
    reward = math_reward(RolloutLog(tmp_path / "rollouts"), group_size=2)

    with pytest.raises(RuntimeError, match="problem a has 1 completions in a step, not one group of 2"):
        reward(prompts=["x"] * 2, problem=["x"] * 2, completions=["\\boxed{1}"] * 2, answer=["1", "1"], problem_id=["a", "b"],
               trainer_state=SimpleNamespace(global_step=0, is_world_process_zero=True))


def test_a_band_drops_groups_outside_it_and_the_log_says_which(tmp_path):
    log = RolloutLog(tmp_path / "rollouts")
    reward = math_reward(log, group_size=4, band=(0.125, 0.875))
    answers = ["1"] * 4 + ["2"] * 4 + ["3"] * 4
    completions = ["\\boxed{1}", "\\boxed{0}", "\\boxed{0}", "\\boxed{0}"] + ["\\boxed{2}"] * 4 + ["\\boxed{0}"] * 4

    rewards = reward(prompts=["x"] * 12, problem=["x"] * 12, completions=completions, answer=answers,
                     problem_id=["a"] * 4 + ["b"] * 4 + ["c"] * 4,
                     trainer_state=SimpleNamespace(global_step=0, is_world_process_zero=True))
    log.flush()

    assert rewards == [1.0, 0.0, 0.0, 0.0] + [1.0] * 4 + [0.0] * 4  # the reward itself is unchanged
    assert reward.dropped == {"b", "c"}
    assert log.table().rows() == [(1, "a", 4, 1, False), (1, "b", 4, 4, True), (1, "c", 4, 0, True)]


def test_the_worlds_verifier_grades_and_the_chosen_reward_scores_while_the_log_counts_right_answers(
    tmp_path, verifier_calls,
):
    log = RolloutLog(tmp_path / "rollouts")
    reward = CorrectnessReward(log, 2, WordVerifier(), shorter_is_better, "shorter_is_better")
    completions = ["Result: Twenty Four", "Result: twenty-five", "Result: Seven", "Result: seven"]

    rewards = reward(prompts=["x"] * 4, completions=completions, answer=["twenty-four"] * 2 + ["seven"] * 2,
                     problem_id=["a", "a", "b", "b"], problem=["What is twenty plus four?"] * 2 + ["?"] * 2,
                     trainer_state=SimpleNamespace(global_step=0, is_world_process_zero=True))
    log.flush()

    assert rewards == pytest.approx([1 - 0.19, -0.19, 1 - 0.13, 1 - 0.13])
    assert log.table().rows() == [(1, "a", 2, 1, False), (1, "b", 2, 2, False)]
    calls = verifier_calls()
    assert [call[1] for call in calls if call[0] == "extract"] == completions
    assert ["equivalent", "twenty-four", "Twenty Four"] in calls and ["equivalent", "seven", "Seven"] in calls
    assert reward.__name__ == "shorter_is_better"  # TRL names the reward's metrics after it
