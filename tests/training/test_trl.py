import importlib.util
import json
import subprocess
import sys

import polars as pl
import pytest
from transformers import AutoModelForCausalLM

from sws.config import TrainConfig
from sws.errors import UserError
from sws.training import TrainJob, train
from sws.training.rewards import correct
from sws.training.rollout_log import RolloutLog
from sws.training.tracking import tracking_dir
from sws.training.trl import grpo_config, latest_checkpoint, load_tokenizer, training_curve
from sws.training.trl_launch import job_file, log_history_file, write_launch
from sws.worlds.arith import build_policy, generate_problems

SETTINGS = TrainConfig(batch_size=2, num_generations=4, max_completion_length=8, save_steps=2)


@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory):
    return build_policy(tmp_path_factory.mktemp("policy") / "tiny")


def make_job(out_dir, init_model, steps=4, identity="job-a", n_problems=12):
    problems = generate_problems(n_problems, seed=3)
    return TrainJob(
        name="test",
        problems=pl.DataFrame({
            "problem_id": [f"p{index}" for index in range(len(problems))],
            "problem": [problem.problem for problem in problems],
            "answer": [problem.answer for problem in problems],
        }),
        init_model=init_model, reward=correct, out_dir=out_dir, steps=steps, world="arith", seed=0, identity=identity,
        config_file=out_dir / "config.yaml",
    )


def test_grpo_config_maps_train_settings_and_passes_extra_fields_through(tmp_path):
    cfg = SETTINGS.model_copy(update={"extra": {"lr_scheduler_type": "cosine", "max_grad_norm": 0.5}})

    args = grpo_config(make_job(tmp_path, tmp_path), cfg)
    default = grpo_config(make_job(tmp_path, tmp_path), SETTINGS)

    assert args.per_device_train_batch_size == 8  # 2 problems x 4 generations
    assert args.num_generations == 4
    assert args.max_steps == 4
    assert args.use_cpu and not args.bf16
    assert args.lr_scheduler_type == "cosine" and args.max_grad_norm == 0.5
    assert default.lr_scheduler_type == "constant" and default.max_grad_norm == 1.0
    assert args.report_to == [] or args.report_to == "none"


@pytest.mark.parametrize(("extra", "message"), [
    ({"lerning_rate": 1.0}, "'train.extra.lerning_rate' is not a trl.GRPOConfig field"),
    ({"max_steps": 9}, "'train.extra.max_steps' is set by sws"),
])
def test_grpo_config_rejects_unknown_or_managed_extra_fields_before_writing(tmp_path, extra, message):
    with pytest.raises(UserError, match=message):
        grpo_config(make_job(tmp_path / "out", tmp_path), SETTINGS.model_copy(update={"extra": extra}))
    assert not (tmp_path / "out").exists()


def test_training_curve_keeps_one_row_per_logged_step():
    history = [
        {"step": 1, "reward": 0.25, "reward_std": 0.1, "loss": 0.0, "completions/mean_length": 7.0, "step_time": 0.2},
        {"step": 2, "reward": 0.5, "reward_std": 0.2, "loss": 0.1, "kl": 0.01},
        {"step": 2, "train_runtime": 3.0, "train_loss": 0.05},
    ]

    curve = training_curve(history)

    assert curve["step"].to_list() == [1, 2]
    assert curve["reward"].to_list() == [0.25, 0.5]
    assert curve["completion_length"].to_list() == [7.0, None]
    assert curve["kl"].to_list() == [None, 0.01]


def test_latest_checkpoint_skips_checkpoints_cut_short(tmp_path):
    for step, complete in ((2, True), (4, True), (6, False)):
        (tmp_path / f"checkpoint-{step}").mkdir()
        if complete:
            (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")

    assert latest_checkpoint(tmp_path) == (tmp_path / "checkpoint-4", 4)
    assert latest_checkpoint(tmp_path / "none") == (None, 0)


def test_the_trainer_reads_prompts_one_character_per_token(tiny_policy):
    tokenizer = load_tokenizer(tiny_policy)
    text = "Compute 4 + 5.\n"

    ids = tokenizer(text)["input_ids"]

    assert len(ids) == len(text)
    assert tokenizer.decode(ids) == text
    assert tokenizer.padding_side == "left"


@pytest.fixture(scope="module")
def trained(tiny_policy, tmp_path_factory):
    out_dir = tmp_path_factory.mktemp("train") / "initial"
    return out_dir, train(make_job(out_dir, tiny_policy), SETTINGS)


@pytest.mark.slow
def test_training_writes_a_loadable_model_and_one_rollout_row_per_group(trained):
    out_dir, outcome = trained

    assert outcome.final_dir == out_dir / "final"
    AutoModelForCausalLM.from_pretrained(outcome.final_dir)
    assert load_tokenizer(outcome.final_dir).decode(load_tokenizer(outcome.final_dir)("7 mod 2\n")["input_ids"]) \
        == "7 mod 2\n"
    rollouts = outcome.rollouts
    assert rollouts.group_by("step").len().sort("step").rows() == [(1, 2), (2, 2), (3, 2), (4, 2)]
    assert set(rollouts["n"].to_list()) == {4}
    assert outcome.curve["step"].to_list() == [1, 2, 3, 4]
    assert outcome.resumed_from_step == 0


@pytest.mark.slow
def test_rerunning_a_finished_job_resumes_at_its_end_and_logs_nothing_twice(trained, tiny_policy):
    out_dir, first = trained

    again = train(make_job(out_dir, tiny_policy), SETTINGS)

    assert again.resumed_from_step == 4
    assert again.rollouts.equals(first.rollouts)
    assert again.curve["step"].to_list() == [1, 2, 3, 4]


@pytest.mark.slow
def test_another_job_in_the_same_folder_starts_over(tiny_policy, tmp_path):
    out_dir = tmp_path / "initial"
    train(make_job(out_dir, tiny_policy, steps=2), SETTINGS)

    other = train(make_job(out_dir, tiny_policy, steps=2, identity="job-b"), SETTINGS)
    forced = train(make_job(out_dir, tiny_policy, steps=2, identity="job-b"), SETTINGS, force=True)

    assert other.resumed_from_step == 0 and forced.resumed_from_step == 0
    assert other.rollouts["step"].to_list() == [1, 1, 2, 2]
    assert json.loads((out_dir / "job.json").read_text())["identity"] == "job-b"


@pytest.mark.slow
def test_micro_batches_smaller_than_the_batch_train_and_log_whole_groups(tiny_policy, tmp_path):
    cfg = SETTINGS.model_copy(update={"micro_batch_size": 2})  # 8 completions a step: 4 accumulated passes of 2

    outcome = train(make_job(tmp_path / "initial", tiny_policy, steps=2), cfg)

    assert outcome.rollouts.group_by("step").len().sort("step").rows() == [(1, 2), (2, 2)]
    assert set(outcome.rollouts["n"].to_list()) == {4}
    assert outcome.curve["step"].to_list() == [1, 2]
    assert grpo_config(make_job(tmp_path, tiny_policy), cfg).gradient_accumulation_steps == 4
    AutoModelForCausalLM.from_pretrained(outcome.final_dir)


@pytest.mark.slow
def test_a_worker_process_trains_the_job_written_for_it(tiny_policy, tmp_path):
    # What each `accelerate launch` process runs, here as the only process (several need several GPUs).
    job = make_job(tmp_path / "initial", tiny_policy, steps=2)
    write_launch(job, SETTINGS)

    subprocess.run([sys.executable, "-m", "sws.training.trl_worker", str(job_file(job.out_dir))], check=True,
                   capture_output=True)

    history = json.loads(log_history_file(job.out_dir).read_text())
    assert training_curve(history)["step"].to_list() == [1, 2]
    assert RolloutLog(job.out_dir / "rollouts").table().group_by("step").len().sort("step").rows() == [(1, 2), (2, 2)]
    AutoModelForCausalLM.from_pretrained(job.out_dir / "final")


def test_online_filter_drops_groups_outside_the_band_from_the_update_and_counts_them_per_step(
        tmp_path, tiny_policy, monkeypatch):
    from sws.training import reward, trl
    from sws.training.rollout_log import dropped_per_step

    # Each problem's answer says how its group of 4 is graded: all right, half right, or none (the tiny policy
    # solves nothing, so the grading is scripted; real grading is tested in test_reward.py).
    def scripted(answers, completions, pool):
        return [answer == "all" or (answer == "half" and index % 2 == 0) for index, answer in enumerate(answers)]

    masks = []
    original = trl.BandFilteredGRPOTrainer._generate_and_score_completions

    def spy(self, inputs):
        output = original(self, inputs)
        masks.extend(zip([row["answer"] for row in inputs], output["completion_mask"].sum(dim=1).tolist(),
                         strict=True))
        return output

    monkeypatch.setattr(reward, "grade_completions", scripted)
    monkeypatch.setattr(trl.BandFilteredGRPOTrainer, "_generate_and_score_completions", spy)
    job = make_job(tmp_path / "out", tiny_policy, steps=3)
    kinds = ["all", "half", "none"] * 4
    job = TrainJob(**{**job.__dict__, "name": "augmented", "online_filter": True,
                      "problems": job.problems.with_columns(answer=pl.Series(kinds))})

    outcome = train(job, SETTINGS.model_copy(update={"online_filter": (0.125, 0.875)}))

    log = outcome.rollouts
    assert log.height == 6  # 3 steps x 2 problems, every group logged
    accuracy = log["n_correct"] / log["n"]
    assert log["dropped"].to_list() == ((accuracy < 0.125) | (accuracy > 0.875)).to_list()
    assert log["dropped"].any() and not log["dropped"].all()
    per_step = dropped_per_step(log)
    assert per_step["groups"].to_list() == [2, 2, 2]
    assert per_step["dropped"].to_list() == log.group_by("step").agg(pl.col("dropped").sum()).sort("step")[
        "dropped"].to_list()
    assert {answer for answer, tokens in masks if tokens == 0} == {"all", "none"}
    assert all(tokens > 0 for answer, tokens in masks if answer == "half")
    assert len(masks) == 6 * 4


def test_online_filter_applies_to_the_arms_that_filter_online_only(tmp_path):
    from sws.training.trl import online_filter_band

    cfg = SETTINGS.model_copy(update={"online_filter": (0.125, 0.875)})
    job = make_job(tmp_path, tmp_path)
    assert online_filter_band(TrainJob(**{**job.__dict__, "name": "augmented", "online_filter": True}), cfg) == (
        0.125, 0.875)
    assert online_filter_band(TrainJob(**{**job.__dict__, "name": "initial"}), cfg) is None


def test_report_to_is_given_to_trl_and_cannot_be_set_through_extra(tmp_path):
    with pytest.raises(UserError, match="'train.extra.report_to' is set by sws"):
        grpo_config(make_job(tmp_path, tmp_path), SETTINGS.model_copy(update={"extra": {"report_to": "wandb"}}))
    assert TrainConfig().model_dump().get("report_to") is None  # the default stays out of saved configs


@pytest.mark.slow
@pytest.mark.parametrize("arm", ["augmented", "baseline"])
def test_training_with_tensorboard_writes_event_files_in_each_arms_folder(tmp_path, tiny_policy, arm):
    if importlib.util.find_spec("tensorboard") is None:
        pytest.skip("tensorboard is not installed: pip install -e '.[tensorboard]'")
    out_dir = tmp_path / "train" / arm

    train(make_job(out_dir, tiny_policy, steps=1), SETTINGS.model_copy(update={"report_to": "tensorboard"}))

    assert list(tracking_dir(out_dir).glob("events.out.tfevents.*"))


@pytest.mark.slow
def test_training_with_wandb_logs_offline_into_the_arms_folder(tmp_path, tiny_policy, monkeypatch):
    if importlib.util.find_spec("wandb") is None:
        pytest.skip("wandb is not installed: pip install -e '.[wandb]'")
    monkeypatch.delenv("WANDB_MODE", raising=False)
    out_dir = tmp_path / "train" / "augmented"

    train(make_job(out_dir, tiny_policy, steps=1), SETTINGS.model_copy(update={"report_to": "wandb"}))

    assert list((tracking_dir(out_dir) / "wandb").glob("offline-run-*"))
