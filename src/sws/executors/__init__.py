"""Where a step's model calls and grading run: in this process (`local`, the default) or on a Ray cluster (`ray`).

A stage builds its requests, reads its inputs and writes its outputs and manifest itself; an executor only runs
the step's bodies: requests to completions (`complete`), and items to graded results (`map_graded`, a function
of a batch of items and a `GradingPool`). So the two executors write the same artifacts, row for row, whenever
the engine is deterministic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from sws.config import EngineConfig, PipelineConfig
from sws.engines.base import Completion, Request
from sws.grading import GradedFn


class Executor(Protocol):
    def complete(self, role_name: str, role: EngineConfig, requests: list[Request], shard_size: int,
                 description: str) -> list[list[Completion]]:
        """Every request's completions, in request order; `role_name` picks the role's `executor.roles` entry."""
        ...

    def map_graded(self, fn: GradedFn, items: list[Any]) -> list[Any]:
        """`fn` over the items in batches, each batch graded by a pool of spawned grading processes."""
        ...


def executor_for(cfg: PipelineConfig, run_dir: Path) -> Executor:
    if cfg.executor.kind == "ray":
        from sws.executors.ray_executor import RayExecutor

        return RayExecutor(cfg, run_dir)
    from sws.executors.local import LocalExecutor

    return LocalExecutor(cfg, run_dir)
