"""The local executor: the role's engine in this process behind the run's request cache, and the shared
grading pool sized by `grading.workers` (one process per CPU by default)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sws.config import EngineConfig, PipelineConfig
from sws.engines.base import Completion, Request
from sws.grading import GradedFn, shared_pool
from sws.llm_calls import engine_for, generate_in_shards


class LocalExecutor:
    def __init__(self, cfg: PipelineConfig, run_dir: Path) -> None:
        self.run_dir = Path(run_dir)
        self.grading = cfg.grading

    def complete(self, role_name: str, role: EngineConfig, requests: list[Request], shard_size: int,
                 description: str) -> list[list[Completion]]:
        if not requests:
            return []
        with engine_for(role, self.run_dir) as engine:
            return generate_in_shards(engine, requests, shard_size, description)

    def map_graded(self, fn: GradedFn, items: list[Any]) -> list[Any]:
        return fn(items, shared_pool(self.grading.workers, self.grading.deadline_s)) if items else []
