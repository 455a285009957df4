"""`sws run --rounds 2` on a small arith pipeline, killed during round 2 and rerun: round 1 is not redone, and the
run ends with both rounds in the ledger and the report."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

SWS = Path(sys.executable).parent / "sws"
PIPELINE = {
    "seed": 0, "world": "arith", "rounds": 2,
    "arith": {"n_seed_problems": 48, "seed_levels": ["easy", "medium"], "n_eval_per_category": 3,
              "bootstrap_steps": 40},
    "roles": {"policy": {"engine": "hf", "model": "", "temperature": 1.0, "options": {"batch_size": 64}}},
    "identify": {"max_acc": 0.75, "max_slope": 1.0},
    "synthesize": {"budget": 16, "levels": ["easy", "medium"], "label_samples": 2, "adapt_rounds": 0},
    "filter": {"band": [0.0, 1.0], "rollouts": 2},
    "train": {"initial_steps": 4, "augmented_steps": 4, "batch_size": 4, "num_generations": 2, "save_steps": 1},
    "eval": {"k": 1},
}


def start(config: Path, run_dir: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen([str(SWS), "run", str(config), "--run", str(run_dir)], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)


def round_1_manifests(run_dir: Path) -> dict[str, str]:
    """Round 1's stage manifests; the run's report is written again once every round is done."""
    return {path.name: path.read_text() for path in (run_dir / "manifests").glob("*.json")
            if path.name not in ("report.json", "rounds_ledger.json")}


def test_a_run_killed_in_round_2_resumes_without_redoing_round_1(tmp_path: Path) -> None:
    config = tmp_path / "rounds.yaml"
    config.write_text(json.dumps(PIPELINE))
    run_dir = tmp_path / "run"
    first = start(config, run_dir)
    round_2_started = run_dir / "rounds" / "2" / "manifests" / "identify.json"
    deadline = time.monotonic() + 900
    while not round_2_started.exists() and first.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert first.poll() is None, first.communicate()[1][-3000:]
    assert round_2_started.exists()
    os.killpg(first.pid, signal.SIGKILL)
    first.communicate()
    assert not (run_dir / "rounds" / "2" / "summary.json").exists()
    before = round_1_manifests(run_dir)
    assert {"train_initial.json", "eval.json", "mix.json"} <= set(before)

    second = start(config, run_dir)
    stdout, stderr = second.communicate(timeout=900)
    assert second.returncode == 0, stderr[-3000:]
    assert round_1_manifests(run_dir) == before  # not one stage of round 1 ran again
    assert "round 2: 1/9 round 2 inputs" in stderr

    ledger = pl.read_parquet(run_dir / "ledger.parquet")
    assert ledger["round"].unique().sort().to_list() == [1, 2]
    assert set(ledger["status"]) <= {"new", "persisting", "resolved", "relapsed"}
    assert set(ledger.filter(pl.col("round") == 1)["status"]) == {"new"}
    second_round = run_dir / "rounds" / "2"
    weak_2 = set(pl.read_parquet(second_round / "weakness.parquet").filter(pl.col("weak"))["problem_id"])
    assert set(pl.read_parquet(second_round / "concepts.parquet")["problem_id"]) <= weak_2
    assert set(ledger.filter((pl.col("round") == 2) & (pl.col("evidence") == "rollouts")
                             & pl.col("weak"))["problem_id"]) == weak_2
    per_round = pl.read_parquet(run_dir / "rounds_summary.parquet")
    assert per_round["round"].to_list() == [1, 2]
    report = (run_dir / "report.html").read_text()
    assert "Rounds: weaknesses across rounds" in report and "<h3>Round 2" in report
    assert "Rounds (ledger.parquet" in stdout
