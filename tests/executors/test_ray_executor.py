"""The Ray executor on a real two-CPU local cluster: same artifacts as the local executor, and resumable."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import polars as pl
import pytest
import yaml
from _synthesis_run import (
    noisy_pipeline_file,
    use_hashed_embeddings,
    write_evaluable_run,
    write_identified_run,
    write_labeled,
)
from polars.testing import assert_frame_equal
from typer.testing import CliRunner

from sws import runner
from sws.cli import app
from sws.config import PipelineConfig
from sws.executors import executor_for
from sws.executors.shards import shards_dir
from sws.grading import grade_answer_pairs
from sws.stages import eval as eval_stage
from sws.stages import filter as filter_stage
from sws.tables import read_parquet, read_table, rejected_path

pytest.importorskip("ray")
pytestmark = pytest.mark.slow

SWS = str(Path(sys.executable).parent / "sws")
SYNTHESIS_OUTPUTS = ("concepts", "concept_sets", "synthetic", "rated", "labeled")
ENGINE_WORKER = "ray::Worker"


def assert_same_table(name: str, local: Path, ray: Path) -> None:
    assert_frame_equal(read_table(local, name), read_table(ray, name))
    if rejected_path(local, name).exists() or rejected_path(ray, name).exists():
        assert_frame_equal(read_parquet(rejected_path(local, name)), read_parquet(rejected_path(ray, name)))


def filter_settings(shard_size: int, address: str | None = None) -> dict:
    """The oracle as the policy, wrong half the time, so accuracies spread over the band and both sides of it."""
    settings = {
        "roles": {"policy": {"engine": "oracle", "model": "arith-oracle", "options": {"labeler_error": 0.5}}},
        "filter": {"rollouts": 8, "shard_size": shard_size},
    }
    return settings | ({"executor": {"kind": "ray", "address": address}} if address else {})


def filter_locally(run_dir: Path, n: int) -> Path:
    write_labeled(run_dir, n=n)
    filter_stage.run(PipelineConfig.model_validate(filter_settings(shard_size=4)), run_dir)
    return run_dir


def markers(run_dir: Path) -> dict[str, int]:
    folder = shards_dir(run_dir)
    return {path.name: path.stat().st_mtime_ns for path in folder.glob("*.done")} if folder.is_dir() else {}


def test_synthesize_on_ray_writes_the_local_executors_artifacts_row_for_row(tmp_path, ray_cluster, monkeypatch):
    use_hashed_embeddings(monkeypatch)
    pipeline = noisy_pipeline_file(tmp_path, budget=40, shard_size=8)
    for executor in ("local", "ray"):
        write_identified_run(tmp_path / executor)
        result = CliRunner().invoke(app, ["synthesize", "--run", str(tmp_path / executor),
                                          "--config", str(pipeline), "--executor", executor])
        assert result.exit_code == 0, result.output

    for name in SYNTHESIS_OUTPUTS:
        assert_same_table(name, tmp_path / "local", tmp_path / "ray")
    assert read_table(tmp_path / "ray", "labeled").height > 0
    assert markers(tmp_path / "ray") and set(markers(tmp_path / "ray")) == set(markers(tmp_path / "local"))


def test_filter_on_ray_writes_the_local_executors_artifacts_row_for_row(tmp_path, ray_cluster):
    local = filter_locally(tmp_path / "local", n=40)
    write_labeled(tmp_path / "ray", n=40)
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(yaml.safe_dump(filter_settings(shard_size=4)))

    result = CliRunner().invoke(app, ["filter", "--run", str(tmp_path / "ray"), "--config", str(pipeline),
                                      "--executor", "ray"])

    assert result.exit_code == 0, result.output
    assert_same_table("filtered", local, tmp_path / "ray")
    assert len(markers(tmp_path / "ray")) == 10


def test_more_replicas_than_the_cluster_can_place_run_on_the_room_there_is_and_say_so(tmp_path, ray_cluster, capsys):
    local = filter_locally(tmp_path / "local", n=40)
    write_labeled(tmp_path / "ray", n=40)
    settings = filter_settings(shard_size=4, address=ray_cluster)
    settings["executor"]["roles"] = {"policy": {"replicas": 8}}

    filter_stage.run(PipelineConfig.model_validate(settings), tmp_path / "ray")

    assert_same_table("filtered", local, tmp_path / "ray")
    said = " ".join(capsys.readouterr().err.split())
    assert "executor.roles.policy.replicas: 8 workers asked for, the Ray cluster has room for 2; using 2" in said


def test_eval_on_ray_writes_the_local_executors_tables_row_for_row(tmp_path, ray_cluster):
    settings = {"arith": {"n_eval_per_category": 3}, "eval": {"k": 2, "benchmarks": ["arith"], "shard_size": 4},
                "roles": {"policy": {"engine": "oracle", "model": "", "options": {"labeler_error": 0.5}}}}
    for executor in ("local", "ray"):
        write_evaluable_run(tmp_path / executor)
        cfg = PipelineConfig.model_validate(settings | {"executor": {"kind": executor, "address": ray_cluster}})
        runner.run(eval_stage.STAGE, cfg, tmp_path / executor)

    for name in ("eval/benchmarks", "eval/weakness"):
        assert_same_table(name, tmp_path / "local", tmp_path / "ray")
    assert 0 < read_table(tmp_path / "ray", "eval/benchmarks")["avg_k"].mean() < 1
    assert markers(tmp_path / "ray")


def test_a_worker_killed_mid_step_is_retried_and_the_artifacts_are_complete_without_duplicates(tmp_path, ray_cluster):
    n = 150
    local = filter_locally(tmp_path / "local", n=n)
    run_dir = tmp_path / "ray"
    write_labeled(run_dir, n=n)
    killed: list[int] = []
    finished_when_killed: list[int] = []

    def kill_the_engine_worker_once_it_has_answered_a_shard() -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not killed:
            done = len(markers(run_dir))
            worker = next(iter(processes_named(ENGINE_WORKER)), None) if done >= 3 else None
            if worker is not None:
                os.kill(worker, signal.SIGKILL)
                killed.append(worker)
                finished_when_killed.append(done)
            time.sleep(0.02)

    killer = threading.Thread(target=kill_the_engine_worker_once_it_has_answered_a_shard)
    killer.start()
    filter_stage.run(PipelineConfig.model_validate(filter_settings(shard_size=1) | {"executor": {"kind": "ray"}}),
                   run_dir)
    killer.join()

    assert killed and finished_when_killed[0] < n, "the engine worker was not killed mid-step"
    assert_same_table("filtered", local, run_dir)
    indices = pl.concat([read_parquet(path) for path in shards_dir(run_dir).glob("*.parquet")])["index"]
    assert sorted(indices.to_list()) == list(range(n))


def test_a_killed_driver_reruns_only_the_unfinished_shards_and_ends_as_an_uninterrupted_run(tmp_path, ray_cluster):
    n = 150
    local = filter_locally(tmp_path / "local", n=n)
    run_dir = tmp_path / "ray"
    write_labeled(run_dir, n=n)
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(yaml.safe_dump(filter_settings(shard_size=1, address=ray_cluster)))
    command = [SWS, "filter", "--run", str(run_dir), "--config", str(pipeline)]

    driver = subprocess.Popen([*command[:1], "--quiet", *command[1:]], start_new_session=True)
    deadline = time.monotonic() + 180
    while driver.poll() is None and time.monotonic() < deadline and len(markers(run_dir)) < 5:
        time.sleep(0.02)
    os.killpg(driver.pid, signal.SIGKILL)
    driver.wait()
    time.sleep(2)  # the cluster notices the dead driver and ends its actors
    before = markers(run_dir)
    assert 0 < len(before) < n, "the driver was not killed mid-step"
    assert not (run_dir / "filtered.parquet").exists()

    rerun = subprocess.run(command, capture_output=True, text=True, timeout=300)

    assert rerun.returncode == 0, rerun.stderr
    reported = re.search(r"(\d+) of (\d+) shards already done", rerun.stderr)
    assert reported is not None, rerun.stderr
    already, total = int(reported.group(1)), int(reported.group(2))
    after = markers(run_dir)
    rerun_shards = [name for name, written in after.items() if before.get(name) != written]
    assert total == n and already >= len(before)
    assert len(rerun_shards) == n - already
    assert all(after[name] == written for name, written in before.items())
    assert_same_table("filtered", local, run_dir)


def processes_named(fragment: str) -> list[int]:
    """Process ids whose command line (Ray sets it to the actor's title) contains `fragment`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if fragment in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def test_shard_markers_record_how_many_requests_their_shard_answers(tmp_path, ray_cluster):
    write_labeled(tmp_path, n=6)

    filter_stage.run(PipelineConfig.model_validate(filter_settings(shard_size=4) | {"executor": {"kind": "ray"}}),
                   tmp_path)

    counts = sorted(json.loads(path.read_text())["requests"] for path in shards_dir(tmp_path).glob("*.done"))
    assert counts == [2, 4]


def test_a_comparison_past_the_grading_deadline_comes_back_ungraded_not_wrong(tmp_path, ray_cluster, slow_to_grade):
    cfg = PipelineConfig.model_validate({"executor": {"kind": "ray"}, "grading": {"workers": 1, "deadline_s": 0.5}})
    pairs = [("2", f"\\boxed{{{slow_to_grade}}}"), ("3", "\\boxed{3}"), ("4", "no answer")]

    assert executor_for(cfg, tmp_path).map_graded(grade_answer_pairs, pairs) == [None, True, False]
