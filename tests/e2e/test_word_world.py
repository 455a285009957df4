"""The whole method on the word world (`word_world`: answers in words, its own verifier), run as `sws run` runs
it, with a tiny Qwen2 policy trained for a few GRPO steps: every place that grades does so with the world's
verifier, which records its calls in one file per pipeline step."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
from word_world import CALLS_ENV, read_calls, seed_rows

from sws import grading, pipeline
from sws.config import PipelineConfig
from sws.world import PipelineStep
from sws.worlds.arith import build_policy


def seed_file(path: Path) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in seed_rows(6)))
    return path


def step_file(calls_dir: Path, step: str) -> Path:
    return calls_dir / f"{re.sub(r'[^a-z]+', '-', step)}.jsonl"


def recorded_per_step(step: PipelineStep, calls_dir: Path, monkeypatch: pytest.MonkeyPatch) -> PipelineStep:
    """`step`, its verifier calls recorded in a file of its own."""
    def run(cfg: PipelineConfig, run_dir: Path, force: bool) -> object:
        monkeypatch.setenv(CALLS_ENV, str(step_file(calls_dir, step.name)))
        grading.close_pool()  # grading workers take the file from their environment when they start
        return step.run(cfg, run_dir, force)

    return PipelineStep(step.name, run)


@pytest.fixture(scope="module")
def word_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    """A finished run of the word world: (run directory, folder of the per-step call files, step names)."""
    root = tmp_path_factory.mktemp("word-world")
    calls_dir = root / "calls"
    calls_dir.mkdir()
    cfg = PipelineConfig.model_validate({
        "world": "wordsums", "seed": 0,
        "prepare": {"input": str(seed_file(root / "seed.jsonl"))},
        "roles": {"auditor": {"engine": "wordsums", "model": "shouting"},
                  "policy": {"engine": "wordsums", "model": "student", "temperature": 1.0}},
        "synthesize": {"budget": 6, "levels": ["easy", "medium"], "label_samples": 4, "concepts_per_problem": 3,
                       "set_size": 2},
        "filter": {"band": [0.0, 1.0], "rollouts": 4},
        "mix": {"sources": ["synthetic"]},
        "train": {"init_model": str(build_policy(root / "tiny-policy")), "initial_steps": 2, "augmented_steps": 2,
                  "batch_size": 2, "num_generations": 2, "max_completion_length": 8, "save_steps": 2,
                  "side_by_side": False},
        "eval": {"k": 2, "benchmarks": ["wordsums"]},
    })
    with pytest.MonkeyPatch.context() as monkeypatch:
        steps = pipeline.pipeline_steps(cfg)
        monkeypatch.setattr(pipeline, "pipeline_steps",
                            lambda cfg: [recorded_per_step(step, calls_dir, monkeypatch) for step in steps])
        pipeline.run(cfg, root / "run")
    grading.close_pool()
    return root / "run", calls_dir, [step.name for step in steps]


@pytest.mark.e2e
@pytest.mark.slow
def test_every_step_of_the_word_world_runs_and_grades_with_its_verifier(word_run) -> None:
    run_dir, calls_dir, steps = word_run
    assert {"synthesize", "filter", "train initial", "train baseline and augmented", "eval"} <= set(steps)
    calls = {step: read_calls(step_file(calls_dir, step)) for step in steps}
    compared = {step: [call[1:] for call in step_calls if call[0] == "equivalent"] for step, step_calls in calls.items()}
    extracted = {step: [call[1] for call in step_calls if call[0] == "extract"] for step, step_calls in calls.items()}
    # label: the labeler's spellings grouped; audit: the auditor's capitals against the labels.
    assert any(answer.istitle() for _, answer in compared["synthesize"])
    assert any(answer.isupper() for _, answer in compared["synthesize"])
    # score: the student's answers against the labels; eval: the policy's against every eval set's answers.
    assert compared["filter"] and compared["eval"]
    # each training run's reward: every completion of every step (2 steps x 2 problems x 2 completions).
    assert len(extracted["train initial"]) == 8 and len(extracted["train baseline and augmented"]) == 16
    assert not calls["prepare"] and not calls["identify"]


@pytest.mark.e2e
@pytest.mark.slow
def test_the_word_runs_artifacts_hold_word_answers_graded_as_words(word_run) -> None:
    run_dir, _, _ = word_run
    labeled = pl.read_parquet(run_dir / "labeled.parquet")
    assert labeled.height > 0 and (labeled["consistency"] == 1.0).all()  # math-verify would split the spellings
    assert not pl.read_parquet(run_dir / "audited.rejected.parquet").height  # the auditor's capitals agree
    scored = pl.read_parquet(run_dir / "scored.parquet")
    assert (scored["n"] == 4).all() and 0 < scored["n_correct"].sum() < 4 * scored.height
    assert pl.read_parquet(run_dir / "augmented.parquet")["source"].str.starts_with("syn/").any()
    benchmarks = pl.read_parquet(run_dir / "eval" / "benchmarks.parquet")
    assert {"wordsums", "seed"} <= set(benchmarks["eval_set"])
    assert set(benchmarks["checkpoint"]) >= {"initial", "augmented", "baseline"}
    for kind in ("initial", "augmented", "baseline"):
        assert (run_dir / "train" / kind / "final" / "config.json").is_file()
    assert (run_dir / "report.html").is_file()
