"""Co-training (the cotrain-quick preset) end to end through `sws run`, and a rerun after a SIGKILL mid-run."""

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from sws.cotrain.arms import COTRAIN_ARMS, INITIAL_VALIDATION
from sws.cotrain.rewards import synthesizer_reward

REPO = Path(__file__).resolve().parents[2]
SWS = Path(sys.executable).parent / "sws"
STEPS, BATCH, ROLLOUTS = 4, 4, 4  # as in src/sws/pipelines/cotrain-quick.yaml


@pytest.fixture(scope="module")
def environment(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    cache = tmp_path_factory.mktemp("cache")  # the tiny warm starts are built once for the module
    return {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1",
            "SWS_CACHE": str(cache)}


def command(run_dir: Path) -> list[str]:
    return [str(SWS), "run", "cotrain-quick", "--run", str(run_dir)]


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory, environment: dict[str, str]) -> Path:
    run_dir = tmp_path_factory.mktemp("cotrain") / "run"
    result = subprocess.run(command(run_dir), cwd=REPO, env=environment, capture_output=True, text=True,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return run_dir


def tables(run_dir: Path) -> dict[str, pl.DataFrame]:
    found = {}
    for name in (INITIAL_VALIDATION, *(name for arm in COTRAIN_ARMS for name in (arm.pool, arm.metrics,
                                                                                 arm.validation))):
        frame = pl.read_parquet(run_dir / f"{name}.parquet")
        found[name] = frame.select(column for column in frame.columns if not column.startswith("seconds_"))
    return found


@pytest.mark.e2e
@pytest.mark.slow
def test_every_arm_writes_its_tables_and_the_pool_bears_out_the_rewards(quick_run: Path) -> None:
    for arm in COTRAIN_ARMS:
        pool = pl.read_parquet(quick_run / f"{arm.pool}.parquet")
        metrics = pl.read_parquet(quick_run / f"{arm.metrics}.parquet")
        validation = pl.read_parquet(quick_run / f"{arm.validation}.parquet")
        assert pool.height == STEPS * BATCH and pool["task_id"].n_unique() == pool.height
        assert metrics["step"].to_list() == list(range(STEPS))
        assert set(pool.filter("valid")["k"]) <= {ROLLOUTS}
        assert metrics["reasoner_rollouts"].to_list() == [BATCH * ROLLOUTS] * STEPS  # every arm alike
        for row in pool.iter_rows(named=True):
            assert row["reward"] == pytest.approx(synthesizer_reward(row["valid"], row["quality"],
                                                                     row["reliability"], row["sr"] or 0.0))
        assert validation.height > 0 and not set(validation["problem"]) & set(pool.filter("valid")["problem"])
        manifest = json.loads((quick_run / "manifests" / f"cotrain_{arm.name}.json").read_text())
        assert manifest["info"]["steps"] == STEPS
    initial = pl.read_parquet(quick_run / f"{INITIAL_VALIDATION}.parquet")
    assert initial["problem"].to_list() == validation["problem"].to_list()  # one split for every arm
    report = (quick_run / "report.html").read_text()
    assert "Retain" in report and "The initial reasoner: held-out accuracy" in report
    headings = re.findall(r"<h2[^>]*>([^<]*)", report)
    assert headings[0] == "Co-training (SynCo)" and "cotrain_productive" in report  # the answer first
    assert "Synthesis funnel" not in headings  # no SwS arm trains in a co-training pipeline


@pytest.mark.e2e
@pytest.mark.slow
def test_a_rerun_after_a_kill_mid_run_writes_the_tables_of_an_uninterrupted_run(
        quick_run: Path, tmp_path: Path, environment: dict[str, str]) -> None:
    run_dir = tmp_path / "run"
    process = subprocess.Popen(command(run_dir), cwd=REPO, env=environment, stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    state = run_dir / "cotrain" / "frozen" / "checkpoints" / "live" / "state.json"
    deadline = time.monotonic() + 300
    while not state.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(process.pid, signal.SIGKILL)  # after the frozen arm's first step
    process.wait()
    rerun = subprocess.run(command(run_dir), cwd=REPO, env=environment, capture_output=True, text=True,
                           timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    manifest = json.loads((run_dir / "manifests" / "cotrain_frozen.json").read_text())
    assert 0 <= manifest["info"]["resumed_from_step"] < STEPS
    expected, got = tables(quick_run), tables(run_dir)
    for name, frame in expected.items():
        assert got[name].equals(frame), name
