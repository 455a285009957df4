from dataclasses import replace

import pytest
import torch
from safetensors.torch import load_file

from sws.cotrain.learner import SamplingSettings
from sws.cotrain.loop import StepSettings
from sws.cotrain.session import LIVE, NEW, OLD, ArmRun, ValidationTask, run_arm
from sws.world import get_world
from sws.worlds.arith.policy import build_policy

SEED_TASKS = (("Compute 47 + 85.", "132"), ("Compute 9 - 3.", "6"), ("Compute 6 * 7.", "42"),
              ("Compute 12 + 30.", "42"), ("Compute 80 - 17.", "63"))
VALIDATION = (ValidationTask("Compute 6 * 7.", "42", "multiplication"),
              ValidationTask("Compute 5 + 5.", "10", "addition"))
SETTINGS = StepSettings(batch_size=4, rollouts=2, synthesizer_sampling=SamplingSettings(1.0, 12),
                        reasoner_sampling=SamplingSettings(1.0, 6))


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    folder = tmp_path_factory.mktemp("models")
    return build_policy(folder / "synthesizer", seed=1), build_policy(folder / "reasoner", seed=2)


def _arm(models, folder, steps, **changes) -> ArmRun:
    synthesizer, reasoner = models
    run = ArmRun(folder, synthesizer, reasoner, steps, seed=3, settings=SETTINGS,
                 categories=("addition", "subtraction", "multiplication"), synthesizer_learning_rate=1e-3,
                 reasoner_learning_rate=1e-3, validation=VALIDATION, validation_rollouts=2)
    return replace(run, **changes)


def _without_seconds(rows):
    return [{k: v for k, v in row.items() if not k.startswith("seconds_")} for row in rows]


def _weights(folder):
    return load_file(folder / "model.safetensors")


def test_a_rerun_after_a_kill_continues_from_the_last_step_as_if_never_stopped(models, tmp_path):
    whole = run_arm(_arm(models, tmp_path / "whole", 3), get_world("arith"))
    run_arm(_arm(models, tmp_path / "killed", 2), get_world("arith"))  # stopped after step 2 of 3
    resumed = run_arm(_arm(models, tmp_path / "killed", 3), get_world("arith"))
    assert resumed.resumed_from_step == 2 and whole.resumed_from_step == 0
    assert resumed.pool == whole.pool and len(whole.pool) == 12
    assert _without_seconds(resumed.metrics) == _without_seconds(whole.metrics)
    assert resumed.validation == whole.validation
    for policy in ("synthesizer", "reasoner"):
        left, right = (_weights(tmp_path / run / LIVE / policy) for run in ("whole", "killed"))
        assert all(torch.equal(left[name], right[name]) for name in left)


def test_a_swap_cut_short_keeps_the_newest_whole_checkpoint(models, tmp_path):
    run_arm(_arm(models, tmp_path, 1), get_world("arith"))
    (tmp_path / LIVE).rename(tmp_path / OLD)  # killed between the two renames
    (tmp_path / NEW).mkdir()  # and a half-written new one
    result = run_arm(_arm(models, tmp_path, 2), get_world("arith"))
    assert result.resumed_from_step == 1 and [row["step"] for row in result.metrics] == [0, 1]
    assert not (tmp_path / OLD).exists() and not (tmp_path / NEW).exists()


def test_the_frozen_synthesizers_saved_weights_never_change(models, tmp_path):
    frozen = _arm(models, tmp_path / "frozen", 2, settings=replace(SETTINGS, update_synthesizer=False))
    run_arm(frozen, get_world("arith"))
    initial, saved = _weights(models[0]), _weights(tmp_path / "frozen" / LIVE / "synthesizer")
    assert initial.keys() == saved.keys() and all(torch.equal(initial[name], saved[name]) for name in initial)


def test_static_arm_trains_on_seed_tasks_and_never_on_a_validation_task(models, tmp_path):
    static = _arm(models, tmp_path, 2, seed_tasks=SEED_TASKS, settings=replace(SETTINGS, update_synthesizer=False))
    result = run_arm(static, get_world("arith"))
    validation = {task.problem for task in VALIDATION}
    assert {row["problem"] for row in result.pool} <= {problem for problem, _ in SEED_TASKS}
    assert all(row["reject_reason"] == "contaminated" for row in result.pool if row["problem"] in validation)
    assert all(row["k"] == 2 for row in result.pool if row["valid"])
    assert [row["k"] for row in result.validation] == [2, 2]


def test_an_arm_that_requires_solutions_rejects_every_card_without_one_in_its_pool(models, tmp_path):
    # the static arm's cards are seed problems with their answers, and no solution
    required = _arm(models, tmp_path, 1, seed_tasks=SEED_TASKS, top_up_tasks=SEED_TASKS,
                    settings=replace(SETTINGS, update_synthesizer=False, require_solution=True))
    result = run_arm(required, get_world("arith"))
    assert [row["reject_reason"] for row in result.pool] == ["no_solution"] * 4
    # still B tasks, from the seed set less the one that is a validation task
    assert (result.metrics[0]["seed_set_tasks"], result.metrics[0]["reasoner_rollouts"]) == (4, 4 * 2)


def test_a_checkpoint_made_under_other_settings_is_started_over(models, tmp_path):
    run_arm(_arm(models, tmp_path, 1, identity="before"), get_world("arith"))
    result = run_arm(_arm(models, tmp_path, 1, identity="after"), get_world("arith"))
    assert result.resumed_from_step == 0 and len(result.metrics) == 1


def test_each_step_is_logged_once_to_the_tracker_even_across_a_resume(models, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    arm_folder = tmp_path / "cotrained"
    tracked = {"report_to": "tensorboard", "arm_folder": arm_folder}
    run_arm(_arm(models, arm_folder / "checkpoints", 2, **tracked), get_world("arith"))
    run_arm(_arm(models, arm_folder / "checkpoints", 3, **tracked), get_world("arith"))  # resumes at step 2
    run_arm(_arm(models, arm_folder / "checkpoints", 3, **tracked), get_world("arith"))  # nothing left to do

    steps = []
    for events in sorted((arm_folder / "tracking").glob("events.out.tfevents.*")):
        accumulator = EventAccumulator(str(events))
        accumulator.Reload()
        steps += [event.step for event in accumulator.Scalars("productive_rate")]
        assert "tokens_solve" in accumulator.Tags()["scalars"]
    assert sorted(steps) == [1, 2, 3]


def test_a_reasoner_that_cannot_connect_finishes_the_synthesizers_session(models, tmp_path, monkeypatch):
    closed = []

    class Session:
        def close(self, succeeded: bool) -> None:
            closed.append(succeeded)

    def make_learner(backend, role, *_):
        if role == "reasoner":
            raise ConnectionError("the reasoner's server did not answer")
        return Session()

    monkeypatch.setattr("sws.cotrain.session.make_learner", make_learner)
    with pytest.raises(ConnectionError):
        run_arm(_arm(models, tmp_path / "arm", steps=1), get_world("arith"))
    assert closed == [False]
