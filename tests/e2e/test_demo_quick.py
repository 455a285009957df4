"""The whole method on the arith world with the quick preset, through the real `sws run` command."""

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

REPO = Path(__file__).resolve().parents[2]
SWS = Path(sys.executable).parent / "sws"
ARTIFACTS = [
    "problems.parquet", "rollouts.parquet", "weakness.parquet", "categories.parquet", "concepts.parquet",
    "synthetic.parquet", "rated.parquet", "labeled.parquet", "filtered.parquet", "filtered.rejected.parquet",
    "augmented.parquet", "verl/augmented.parquet", "eval/problems.parquet", "eval/benchmarks.parquet",
    "eval/weakness.parquet", "report.html", "summary.json", "config.yaml", "pool/arith.jsonl", "selected.parquet",
    "selected_mix.parquet",
    *(f"train/{kind}/final/config.json" for kind in ("initial", "augmented", "baseline", "selected")),
]


def sws_run(run_dir: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([str(SWS), "run", "quick", "--run", str(run_dir)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=1800)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    run_dir = tmp_path_factory.mktemp("quick") / "run"
    return run_dir, sws_run(run_dir)


@pytest.mark.e2e
@pytest.mark.slow
def test_quick_pipeline_writes_every_artifact(quick_run) -> None:
    run_dir, result = quick_run
    assert result.returncode == 0, result.stderr[-3000:]
    missing = [name for name in ARTIFACTS if not (run_dir / name).exists()]
    assert not missing
    augmented = pl.read_parquet(run_dir / "augmented.parquet")
    assert augmented["problem_id"].n_unique() == augmented.height
    assert augmented.filter(pl.col("source").str.starts_with("syn/")).height > 0
    assert "rule-based stand-in for teacher models" in (run_dir / "report.html").read_text()


@pytest.mark.e2e
@pytest.mark.slow
def test_the_selected_arm_adds_as_many_pool_problems_as_synthesis_kept_and_trains_as_long(quick_run) -> None:
    run_dir, result = quick_run
    assert result.returncode == 0, result.stderr[-3000:]
    problems, selected = pl.read_parquet(run_dir / "problems.parquet"), pl.read_parquet(run_dir / "selected.parquet")
    assert 0 < selected.height <= pl.read_parquet(run_dir / "filtered.parquet").height
    selected_mix = pl.read_parquet(run_dir / "selected_mix.parquet")
    assert set(selected_mix["problem_id"]) == set(problems["problem_id"]) | set(selected["problem_id"])
    augmented = pl.read_parquet(run_dir / "augmented.parquet")
    assert not set(augmented["problem_id"]) & set(selected["problem_id"])
    curves = {kind: pl.read_parquet(run_dir / "train" / kind / "curve.parquet").height
              for kind in ("augmented", "baseline", "selected")}
    assert len(set(curves.values())) == 1
    assert "Synthesis against selection" in (run_dir / "report.html").read_text()


@pytest.mark.e2e
@pytest.mark.slow
def test_quick_pipeline_prints_and_saves_the_headline(quick_run) -> None:
    run_dir, result = quick_run
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    for checkpoint in ("initial", "baseline", "augmented", "selected"):
        solved = summary[f"weak_solved_{checkpoint}"]
        assert 0.0 <= solved["overall"] <= 1.0
        assert solved["per_category"]
        assert all(0.0 <= share <= 1.0 for share in solved["per_category"].values())
    assert summary["n_weak"] > 0
    assert "Previously weak problems solved" in result.stdout
    assert f"report: {run_dir / 'report.html'}" in result.stdout


@pytest.mark.e2e
@pytest.mark.slow
def test_rerun_skips_every_stage_and_keeps_the_results(quick_run) -> None:
    run_dir, first = quick_run
    assert first.returncode == 0, first.stderr[-3000:]

    def manifests() -> dict[str, str]:
        return {path.name: path.read_text() for path in (run_dir / "manifests").glob("*.json")}

    before, summary = manifests(), (run_dir / "summary.json").read_text()
    again = sws_run(run_dir)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "up to date, skipped" in again.stderr
    assert manifests() == before
    assert (run_dir / "summary.json").read_text() == summary
