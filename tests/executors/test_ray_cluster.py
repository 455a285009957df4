"""A cluster that cannot be reached, or cannot hold what a role asks for, is one `error:` line naming the setting."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from _synthesis_run import write_labeled

pytest.importorskip("ray")

SWS = str(Path(sys.executable).parent / "sws")


def filter_on_ray(tmp_path: Path, executor: dict) -> subprocess.CompletedProcess:
    write_labeled(tmp_path / "run", n=4)
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(yaml.safe_dump({
        "roles": {"policy": {"engine": "oracle", "model": "arith-oracle"}},
        "executor": {"kind": "ray", **executor},
    }))
    return subprocess.run([SWS, "filter", "--run", str(tmp_path / "run"), "--config", str(pipeline)],
                          capture_output=True, text=True, timeout=300)


def test_a_cluster_that_cannot_be_reached_is_one_error_line_naming_executor_address(tmp_path):
    result = filter_on_ray(tmp_path, {"address": "127.0.0.1:9"})

    assert result.returncode == 2
    assert result.stderr.splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith("error: executor.address '127.0.0.1:9': no Ray cluster could be reached")
    assert "ray start --head" in result.stderr
    assert not (tmp_path / "run" / "filtered.parquet").exists()


@pytest.mark.slow
def test_a_role_asking_for_gpus_on_a_cluster_without_any_is_one_error_line_naming_the_setting(tmp_path, ray_cluster):
    result = filter_on_ray(tmp_path, {"address": ray_cluster, "roles": {"policy": {"replicas": 2, "gpus": 1}}})

    assert result.returncode == 2
    assert result.stderr.splitlines() == [result.stderr.strip()]
    assert result.stderr.startswith("error: executor.roles.policy.gpus: each replica asks for 1 GPU(s) but the Ray "
                                    "cluster has 0")
