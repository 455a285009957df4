"""A real local Ray cluster (two CPUs) shared by the Ray executor tests; they are skipped where Ray is absent."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

# The synthesis stage tests' builders of run directories (tests/stages/_synthesis_run.py).
sys.path.insert(0, str(Path(__file__).parents[1] / "stages"))


@pytest.fixture(scope="package")
def ray_cluster() -> str:
    """The GCS address of a two-CPU Ray cluster started by (and joined by) this test process."""
    ray = pytest.importorskip("ray")
    if ray.is_initialized():  # building a ray.data.llm processor starts a default local instance
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()
