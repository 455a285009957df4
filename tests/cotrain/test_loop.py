import random
import threading
from dataclasses import replace

import pytest

from sws.cotrain.context import Ledger
from sws.cotrain.learner import Completion, SamplingSettings
from sws.cotrain.loop import StepSettings, run_step
from sws.cotrain.rewards import synthesizer_reward
from sws.cotrain.top_up import TopUp
from sws.cotrain.verify import CardVerifier
from sws.world import get_world

CATEGORIES = ["addition", "subtraction", "multiplication"]
CARDS = ["problem: Compute 47 + 85.\nanswer: 132", "problem: Compute 47 + 85.\nanswer: 132",
         "problem: Compute 9 - 3.\nanswer: 5", "problem: Compute 6 * 7.", "garbage"]
SEED_SET = (("Compute 11 + 11.", "22"), ("Compute 30 - 8.", "22"), ("Compute 3 * 4.", "12"),
            ("Compute 50 + 1.", "51"), ("Compute 9 * 9.", "81"), ("Compute 70 - 7.", "63"))


class ScriptedLearner:
    """Answers every prompt with the same texts, cycling; records every call the loop makes."""

    def __init__(self, texts):
        self.texts = texts
        self.calls = []

    def sample(self, prompts, n, settings):
        self.calls.append(("sample", list(prompts), n, settings))
        return [[Completion(p, text, len(text)) for text in (self.texts[i % len(self.texts)] for i in range(n))]
                for p in prompts]

    def forward_backward(self, batch, settings):
        self.calls.append(("forward_backward", list(batch), settings))
        return 0.0

    def optim_step(self):
        self.calls.append(("optim_step",))

    def sync_weights(self):
        self.calls.append(("sync_weights",))

    def names(self):
        return [call[0] for call in self.calls]


def _run(settings: StepSettings, steps: int = 2, synthesizer=None, reasoner=None, seed_set=SEED_SET,
         validation=()):
    synthesizer = synthesizer or ScriptedLearner(CARDS)
    reasoner = reasoner or ScriptedLearner(["\\boxed{132}", "\\boxed{1}", "\\boxed{42}"])
    verifier = CardVerifier(get_world("arith").truth, validation, CATEGORIES, get_world("arith").verifier,
                            require_solution=settings.require_solution)  # as the session builds it
    ledger, rows, metrics = Ledger(), [], []
    for step in range(steps):
        top_up = TopUp.of(rows, seed_set, verifier.is_contaminated)
        result = run_step(step, len(rows), synthesizer, reasoner, verifier, get_world("arith"), ledger,
                          CATEGORIES, settings, random.Random(step), top_up)
        rows += result.pool_rows
        metrics.append(result.metrics)
    return synthesizer, reasoner, rows, metrics


SETTINGS = StepSettings(batch_size=5, rollouts=3)


def test_rewards_recomputed_from_the_pool_rows():
    _, _, rows, _ = _run(SETTINGS)
    for row in rows:
        assert row["reward"] == synthesizer_reward(row["valid"], row["quality"], row["reliability"],
                                                   row["sr"] or 0.0)
    first = rows[0]
    assert (first["valid"], first["n_correct"], first["sr"], first["reward"]) == (True, 1, 1 / 3, pytest.approx(2 / 3))
    assert rows[1]["reject_reason"] == "duplicate"  # the same card twice in one batch


def test_task_ids_unique_and_exactly_k_rollouts_per_trained_task():
    _, reasoner, rows, _ = _run(SETTINGS)
    assert len({row["task_id"] for row in rows}) == len(rows) == 10
    for call in reasoner.calls:
        if call[0] == "sample":
            assert call[2] == 3
        if call[0] == "forward_backward":
            problems = [item.completion.prompt for item in call[1]]
            assert all(problems.count(p) == 3 for p in problems)
    assert all(row["k"] == (3 if row["valid"] else 0) for row in rows)


def test_frozen_arm_differs_by_the_update_switch_and_keeps_the_live_context():
    frozen = replace(SETTINGS, update_synthesizer=False)
    assert {k for k, v in frozen.__dict__.items() if SETTINGS.__dict__[k] != v} == {"update_synthesizer"}
    synthesizer, _, rows, _ = _run(frozen)
    assert synthesizer.names() == ["sample", "sample"]
    contexts = [call[1][0] for call in synthesizer.calls]
    assert contexts[0] != contexts[1]  # rebuilt from the ledger on every step, also when frozen
    assert rows[0]["context_hash"] != rows[5]["context_hash"]


def test_cotrained_synthesizer_is_updated_on_the_whole_batch_every_step():
    synthesizer, _, _, _ = _run(SETTINGS)
    updates = [call for call in synthesizer.calls if call[0] == "forward_backward"]
    assert len(updates) == 2 and all(len(call[1]) == 5 for call in updates)


class MeetingLearner(ScriptedLearner):
    """Its forward-backward returns only once the other policy's has started too."""

    def __init__(self, texts, meeting):
        super().__init__(texts)
        self.meeting = meeting

    def forward_backward(self, batch, settings):
        self.meeting.wait()
        return super().forward_backward(batch, settings)


def test_both_policies_update_at_once():
    meeting = threading.Barrier(2, timeout=10)  # one after the other, the first would wait alone and break it
    synthesizer, reasoner, _, _ = _run(SETTINGS, steps=1, synthesizer=MeetingLearner(CARDS, meeting),
                                       reasoner=MeetingLearner(["\\boxed{132}", "\\boxed{1}"], meeting))
    for learner in (synthesizer, reasoner):
        assert learner.names()[-3:] == ["forward_backward", "optim_step", "sync_weights"]


def test_a_failed_synthesizer_update_fails_the_step():
    class Failing(ScriptedLearner):
        def optim_step(self):
            raise RuntimeError("the synthesizer's server went away")

    with pytest.raises(RuntimeError, match="went away"):
        _run(SETTINGS, steps=1, synthesizer=Failing(CARDS))


def test_per_role_sampling_settings_reach_the_learners():
    settings = replace(SETTINGS, synthesizer_sampling=SamplingSettings(1.3, 40, "S: "),
                       reasoner_sampling=SamplingSettings(0.6, 12, "R: "))
    synthesizer, reasoner, _, _ = _run(settings, steps=1)
    assert {call[-1] for call in synthesizer.calls if call[0] in ("sample", "forward_backward")} == {
        settings.synthesizer_sampling}
    assert {call[-1] for call in reasoner.calls if call[0] in ("sample", "forward_backward")} == {
        settings.reasoner_sampling}


def test_shuffled_control_trains_on_permuted_rewards_but_records_the_true_ones():
    true_synthesizer, _, true_rows, _ = _run(SETTINGS, steps=1)
    synthesizer, _, rows, _ = _run(replace(SETTINGS, shuffle_synthesizer_rewards=True), steps=1)
    assert [r["reward"] for r in rows] == [r["reward"] for r in true_rows]

    def trained_advantages(learner):
        update, = [call for call in learner.calls if call[0] == "forward_backward"]
        return [item.advantage for item in update[1]]

    shuffled, true = trained_advantages(synthesizer), trained_advantages(true_synthesizer)
    assert sorted(shuffled) == pytest.approx(sorted(true)) and shuffled != true


def test_metrics_count_productive_tasks_against_generated_and_valid():
    _, _, rows, metrics = _run(SETTINGS, steps=1)
    valid = [row for row in rows if row["valid"]]
    productive = sum(0 < row["sr"] < 1 for row in valid)
    assert metrics[0]["productive_rate"] == productive / 5
    assert metrics[0]["productive_of_valid"] == productive / len(valid)
    assert sum(metrics[0]["sr_histogram"]) == len(valid)


def test_metrics_count_never_solved_and_duplicate_tasks_per_valid_task():
    _, _, rows, metrics = _run(SETTINGS, steps=1)
    # valid: 47 + 85 (one rollout of three right), 9 - 3 (none), 6 * 7 (one); the second 47 + 85 a duplicate
    assert [row["n_correct"] for row in rows if row["valid"]] == [1, 0, 1]
    step = metrics[0]
    assert (step["productive_of_valid"], step["never_solved_of_valid"]) == (pytest.approx(2 / 3), pytest.approx(1 / 3))
    assert (step["duplicates"], step["duplicates_of_valid"]) == (1, pytest.approx(1 / 3))


def test_a_step_without_a_valid_task_has_no_share_per_valid_task():
    _, _, _, metrics = _run(SETTINGS, steps=1, synthesizer=ScriptedLearner(["garbage"]))
    assert metrics[0]["valid"] == 0 and metrics[0]["productive_rate"] == 0
    assert [metrics[0][name] for name in ("productive_of_valid", "never_solved_of_valid", "duplicates_of_valid")] == [
        None, None, None]


def test_tokens_per_phase_count_what_each_policy_generated_and_trained_on():
    _, _, _, metrics = _run(SETTINGS, steps=1)
    card_tokens = sum(map(len, CARDS))
    # 3 valid cards topped up to B = 5 tasks, K = 3 rollouts each
    rollout_tokens = 5 * sum(map(len, ["\\boxed{132}", "\\boxed{1}", "\\boxed{42}"]))
    assert (metrics[0]["tokens_generate"], metrics[0]["tokens_solve"]) == (card_tokens, rollout_tokens)
    assert metrics[0]["tokens_update"] == rollout_tokens + card_tokens
    _, _, _, frozen = _run(replace(SETTINGS, update_synthesizer=False), steps=1)
    assert frozen[0]["tokens_update"] == rollout_tokens  # a frozen synthesizer trains on nothing


def _sampled_tasks(reasoner):
    """Per step: the reasoner's sampled prompts and their rollouts in all."""
    return [(call[1], len(call[1]) * call[2]) for call in reasoner.calls if call[0] == "sample"]


def test_every_arm_draws_the_same_reasoner_rollouts_per_step_whatever_its_acceptance():
    _, accepting, _, accepting_metrics = _run(SETTINGS, steps=3)
    frozen = replace(SETTINGS, update_synthesizer=False)
    _, rejecting, _, rejecting_metrics = _run(frozen, steps=3, synthesizer=ScriptedLearner(["garbage"]))
    assert [metrics["valid"] for metrics in accepting_metrics] == [3, 0, 0]
    assert [metrics["valid"] for metrics in rejecting_metrics] == [0, 0, 0]
    for reasoner, metrics in ((accepting, accepting_metrics), (rejecting, rejecting_metrics)):
        assert [rollouts for _, rollouts in _sampled_tasks(reasoner)] == [5 * 3] * 3  # B tasks, K rollouts each
        assert [step["reasoner_rollouts"] for step in metrics] == [15] * 3
    more = replace(SETTINGS, reasoner_tasks=7)
    _, reasoner, _, metrics = _run(more, steps=1)
    assert _sampled_tasks(reasoner)[0][1] == metrics[0]["reasoner_rollouts"] == 7 * 3


def test_the_step_is_topped_up_with_the_arms_earlier_accepted_tasks_before_seed_problems():
    _, reasoner, rows, metrics = _run(SETTINGS, steps=2)
    accepted = {row["problem"] for row in rows if row["valid"]}
    first, second = (prompts for prompts, _ in _sampled_tasks(reasoner))
    seed_problems = {problem for problem, _ in SEED_SET}
    assert (metrics[0]["replayed_tasks"], metrics[0]["seed_set_tasks"]) == (0, 2)  # nothing accepted before
    assert sum(any(problem in prompt for problem in seed_problems) for prompt in first) == 2
    assert (metrics[1]["valid"], metrics[1]["replayed_tasks"], metrics[1]["seed_set_tasks"]) == (0, 3, 2)
    assert {problem for problem in accepted if any(problem in prompt for prompt in second)} == accepted
    assert metrics[0]["productive_of_valid"] == pytest.approx(2 / 3)  # the step's own cards, never the top-up


def test_a_seed_problem_repeating_a_validation_task_never_tops_up_a_step():
    validation = SEED_SET[0][0]
    _, reasoner, _, _ = _run(SETTINGS, steps=4, synthesizer=ScriptedLearner(["garbage"]), validation=[validation])
    prompts = [prompt for step, _ in _sampled_tasks(reasoner) for prompt in step]
    assert len(prompts) == 4 * 5 and not any(validation in prompt for prompt in prompts)


def test_the_pool_table_carries_each_cards_solution_and_rejects_one_without_where_required():
    solved = "problem: Compute 12 + 30.\nsolution: 12 + 30 = \\boxed{42}\nanswer: 41"
    settings = replace(SETTINGS, require_solution=True)
    _, _, rows, _ = _run(settings, steps=1, synthesizer=ScriptedLearner([solved, *CARDS[2:]]))
    assert [row["reject_reason"] for row in rows] == [None, "no_solution", "no_solution", "no_problem", "duplicate"]
    first = rows[0]
    assert (first["solution"], first["solution_answer"], first["synth_answer"]) == (
        "12 + 30 = \\boxed{42}", "42", "41")
    # reliability is the solution's agreement with the truth, so the reward is the teachability alone
    assert (first["reliability"], first["quality_reason"], first["reward"]) == (1.0, "no_judge", pytest.approx(2 / 3))


def test_fewer_reasoner_tasks_than_cards_refused():
    with pytest.raises(ValueError, match="at least batch_size"):
        StepSettings(batch_size=8, reasoner_tasks=4)


def test_fewer_than_two_rollouts_refused():
    with pytest.raises(ValueError, match="K ≥ 2"):
        StepSettings(rollouts=1)
