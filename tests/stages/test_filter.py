import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest
import yaml
from _synthesis_run import ScriptedEngine, use_engines, write_labeled
from word_world import problem_text, true_answer

from sws.config import PipelineConfig
from sws.errors import UserError
from sws.manifests import read_manifest
from sws.stages import filter as stage
from sws.stages import score
from sws.tables import read_parquet, read_table, rejected_path, write_table
from sws.worlds.arith import build_policy

SWS = str(Path(sys.executable).parent / "sws")


def oracle_policy_config(labeler_error, band=(0.25, 0.75), rollouts=8):
    """The oracle answering as the policy: each sample is wrong with probability `labeler_error`."""
    return PipelineConfig.model_validate({
        "roles": {"policy": {"engine": "oracle", "model": "arith-oracle",
                             "options": {"labeler_error": labeler_error}}},
        "filter": {"band": list(band), "rollouts": rollouts},
    })


def test_problems_inside_the_band_are_kept_and_the_rest_rejected_with_their_accuracy(tmp_path):
    write_labeled(tmp_path)

    result = stage.run(oracle_policy_config(labeler_error=0.5), tmp_path)

    kept = read_table(tmp_path, "filtered")
    rejected = read_parquet(rejected_path(tmp_path, "filtered"))
    assert kept["accuracy"].is_between(0.25, 0.75).all()
    assert not rejected["accuracy"].is_between(0.25, 0.75).any()
    assert sorted(kept["syn_id"].to_list() + rejected["syn_id"].to_list()) == sorted(f"syn-{i}" for i in range(40))
    assert (kept["accuracy"] == kept["n_correct"] / kept["n"]).all() and set(kept["n"]) == {8}
    assert kept.height > 0 and rejected.height > 0
    reasons = dict(zip(rejected["syn_id"], rejected["reject_reason"], strict=True))
    for syn_id, accuracy in zip(rejected["syn_id"], rejected["accuracy"], strict=True):
        assert reasons[syn_id] == ("too hard: accuracy below 0.25" if accuracy < 0.25 else
                                   "too easy: accuracy above 0.75")
    assert {"concepts", "level", "consistency"} <= set(kept.columns)
    assert result.rows == {"filtered": kept.height, "filtered.rejected": rejected.height}
    assert (tmp_path / "plots" / "filter_accuracy.png").stat().st_size > 0


def test_accuracy_is_graded_against_the_label(tmp_path):
    write_labeled(tmp_path, n=12)

    stage.run(oracle_policy_config(labeler_error=0.0, band=(0.0, 0.5)), tmp_path)

    rejected = read_parquet(rejected_path(tmp_path, "filtered"))
    assert read_table(tmp_path, "filtered").height == 0
    assert rejected["accuracy"].to_list() == [1.0] * 12
    assert set(rejected["reject_reason"]) == {"too easy: accuracy above 0.5"}


def test_both_ends_of_the_band_are_inclusive(tmp_path):
    write_labeled(tmp_path, n=12)

    stage.run(oracle_policy_config(labeler_error=0.0, band=(1.0, 1.0), rollouts=3), tmp_path)

    assert read_table(tmp_path, "filtered").height == 12


def test_accuracy_is_over_the_graded_rollouts_and_a_problem_with_none_graded_is_rejected_as_ungraded(
    tmp_path, monkeypatch, slow_to_grade,
):
    write_labeled(tmp_path, n=3)
    answers = dict(read_table(tmp_path, "labeled").select("problem", "answer").iter_rows())
    never_graded, once_ungraded = list(answers)[:2]

    def respond(request, index):
        problem = request.fields["problem"]
        slow = problem == never_graded or (problem == once_ungraded and index == 0)
        return f"\\boxed{{{slow_to_grade if slow else answers[problem]}}}"

    use_engines(monkeypatch, {"scripted-policy": ScriptedEngine(respond)})
    cfg = PipelineConfig.model_validate({
        "roles": {"policy": {"engine": "oracle", "model": "scripted-policy"}},
        "filter": {"band": [0.0, 1.0], "rollouts": 2}, "grading": {"workers": 1, "deadline_s": 0.5},
    })

    result = stage.run(cfg, tmp_path)

    scored = read_table(tmp_path, "scored").select("syn_id", "n", "n_correct", "accuracy")
    assert scored.rows() == [("syn-0", 0, 0, None), ("syn-1", 1, 1, 1.0), ("syn-2", 2, 2, 1.0)]
    assert read_table(tmp_path, "filtered")["syn_id"].to_list() == ["syn-1", "syn-2"]
    rejected = read_parquet(rejected_path(tmp_path, "filtered"))
    assert rejected["syn_id"].to_list() == ["syn-0"] and rejected["reject_reason"][0].startswith("ungraded")
    assert result.info["ungraded"] == 1 and read_manifest(tmp_path, "score")["info"]["ungraded_samples"] == 3


def test_an_empty_policy_model_needs_the_initial_checkpoint(tmp_path):
    write_labeled(tmp_path, n=4)

    with pytest.raises(UserError, match="sws train initial"):
        stage.run(PipelineConfig(), tmp_path)
    assert not (tmp_path / "filtered.parquet").exists() and not (tmp_path / "cache").exists()


def test_an_empty_labeled_set_is_a_user_error(tmp_path):
    write_labeled(tmp_path, n=0)

    with pytest.raises(UserError, match="no labeled problems"):
        stage.run(oracle_policy_config(labeler_error=0.0), tmp_path)


@pytest.mark.slow
def test_a_killed_filter_run_completes_on_rerun_with_every_problem_once(tmp_path):
    run_dir = tmp_path / "run"
    write_labeled(run_dir, n=48)
    policy = build_policy(tmp_path / "policy")
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(yaml.safe_dump({
        "roles": {"policy": {"engine": "hf", "model": str(policy), "options": {"batch_size": 8}}},
        "filter": {"rollouts": 4, "shard_size": 4, "max_tokens": 12},
    }))
    cache = run_dir / "cache" / "requests.sqlite"

    process = subprocess.Popen([SWS, "--quiet", "filter", "--run", str(run_dir), "--config", str(pipeline)])
    deadline = time.monotonic() + 300
    while process.poll() is None and time.monotonic() < deadline and _cached_samples(cache) < 8:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    cached_before = _cached_samples(cache)
    assert 0 < cached_before < 48 * 4
    assert not (run_dir / "filtered.parquet").exists()

    subprocess.run([SWS, "--quiet", "filter", "--run", str(run_dir), "--config", str(pipeline)], check=True)

    kept = read_table(run_dir, "filtered")
    rejected = read_parquet(rejected_path(run_dir, "filtered"))
    assert sorted(kept["syn_id"].to_list() + rejected["syn_id"].to_list()) == sorted(f"syn-{i}" for i in range(48))
    assert set(kept["n"].to_list() + rejected["n"].to_list()) == {4}
    assert _cached_samples(cache) == 48 * 4


def _cached_samples(cache: Path) -> int:
    if not cache.exists():
        return 0
    try:
        with sqlite3.connect(cache, timeout=5) as db:
            return db.execute("SELECT COUNT(*) FROM completions").fetchone()[0]
    except sqlite3.OperationalError:  # the table is not created yet
        return 0


def test_the_cli_rejects_a_band_that_is_not_an_interval(tmp_path):
    write_labeled(tmp_path, n=4)

    result = subprocess.run([SWS, "filter", "--run", str(tmp_path), "--band", "0.8", "0.2"],
                            capture_output=True, text=True)

    assert result.returncode == 2
    assert "field 'filter.band'" in result.stderr and "0 <= low <= high <= 1" in result.stderr
    assert not (tmp_path / "filtered.parquet").exists()


def test_a_label_every_policy_sample_contradicts_with_one_answer_is_rejected_as_policy_disagrees(
    tmp_path, monkeypatch,
):
    write_labeled(tmp_path, n=4)
    problems = read_table(tmp_path, "labeled")["problem"].to_list()
    answers = dict(read_table(tmp_path, "labeled").select("problem", "answer").iter_rows())
    unanimous_other, split_wrong, cut_short = problems[:3]

    def respond(request, index):
        problem = request.fields["problem"]
        if problem == unanimous_other:
            return "\\boxed{-7}" if index else "So it is \\boxed{ -7 }."
        if problem in (split_wrong, cut_short):
            return f"\\boxed{{{-7 - index}}}" if problem == split_wrong or index else "I do not know."
        return f"\\boxed{{{answers[problem]}}}"

    use_engines(monkeypatch, {"scripted-policy": ScriptedEngine(respond)})
    cfg = PipelineConfig.model_validate({
        "roles": {"policy": {"engine": "oracle", "model": "scripted-policy"}},
        "filter": {"band": [0.0, 1.0], "rollouts": 3}})

    result = stage.run(cfg, tmp_path)

    rejected = read_parquet(rejected_path(tmp_path, "filtered"))
    assert rejected.select("problem", "reject_reason", "policy_answer").rows() == [
        (unanimous_other, "policy_disagrees", "-7")]
    assert read_table(tmp_path, "filtered").height == 3 and result.info["policy_disagrees"] == 1
    cfg.audit.policy_disagrees = False
    stage.run(cfg, tmp_path)
    assert read_table(tmp_path, "filtered").height == 4


@pytest.mark.parametrize(("verdicts", "settled"), [
    ([True, False], False),  # 1 of 2, 6 left: anywhere in [1/8, 7/8]
    ([True, False, True, False], True),  # 2 of 4, 4 left: [2/8, 6/8] lies inside [0.25, 0.75]
    ([True] * 7, True),  # 7 of 7, 1 left: at least 7/8, above the band
    ([True, None, True, True, True, True], False),  # 5 of 5 graded, 2 left: [5/7, 1] crosses 0.75
    ([False] * 7, False),  # accuracy 0 so far matters (policy_disagrees, adaptive rounds)
    ([None, None], False),  # nothing graded: its difficulty is unknown
])
def test_a_problem_is_settled_when_its_band_decision_cannot_change(verdicts, settled):
    assert score.band_settled(verdicts, 8, (0.25, 0.75), zero_matters=True, one_matters=False) is settled
    assert score.band_settled([False] * 7, 8, (0.25, 0.75), zero_matters=False, one_matters=False)


def test_filtering_in_waves_keeps_the_problems_of_drawing_every_sample(tmp_path):
    kept, drawn = {}, {}
    for wave in (8, 2, 1):
        run = tmp_path / f"wave-{wave}"
        write_labeled(run, n=40)
        cfg = oracle_policy_config(labeler_error=0.5)
        cfg.filter.wave = wave
        stage.run(cfg, run)
        kept[wave] = read_table(run, "filtered")["syn_id"].to_list()
        drawn[wave] = read_manifest(run, "score")["tokens"]["policy"]["completions"]
    assert kept[2] == kept[1] == kept[8] and len(kept[8]) > 5
    assert drawn[8] == 8 * 40 and drawn[1] < drawn[2] < drawn[8]


def write_word_labeled(run_dir) -> dict[str, str]:
    """labeled.parquet of the word world: three sums and their answers in words."""
    problems = [problem_text("addition", 20, 4), problem_text("addition", 13, 8), problem_text("subtraction", 30, 9)]
    labels = {problem: true_answer(problem) for problem in problems}
    write_table(run_dir, "labeled", pl.DataFrame({
        "syn_id": [f"syn-{index}" for index in range(3)], "category": ["addition", "addition", "subtraction"],
        "concepts": [["number words"]] * 3, "level": ["easy"] * 3, "problem": problems,
        "answer": list(labels.values()), "consistency": [1.0] * 3}))
    return labels


@pytest.mark.parametrize("wave", [None, 2])
def test_a_worlds_verifier_grades_the_policy_and_finds_its_unanimous_answer(tmp_path, verifier_calls, wave):
    labels = write_word_labeled(tmp_path)
    # The world's rules as the policy: always right, every other sample written as "Twenty Four".
    config = PipelineConfig.model_validate({
        "world": "wordsums", "roles": {"policy": {"engine": "wordsums", "model": "rules"}},
        "filter": {"rollouts": 4, "band": [0.0, 1.0], "wave": wave}})

    stage.run(config, tmp_path)

    # math-verify would count half the samples wrong and find two answers where the policy gave one.
    scored = read_table(tmp_path, "scored")
    n = 4 if wave is None else 2  # waves stop once the band [0, 1] is settled
    assert scored.select("n", "n_correct").rows() == [(n, n)] * 3
    assert scored["policy_answer"].str.to_lowercase().str.replace(" ", "-").to_list() == list(labels.values())
    assert read_table(tmp_path, "filtered").height == 3
    compared = {tuple(sorted(call[1:])) for call in verifier_calls() if call[0] == "equivalent"}
    assert compared == {("Twenty Four", "twenty-four"), ("Twenty One", "twenty-one")}
