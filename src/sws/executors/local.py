"""The local executor: each pending shard answered by the role's engine in this process, behind the run's
request cache, and grading on the shared pool sized by `grading.workers` (one process per CPU by default)."""

from __future__ import annotations

from typing import Any

from sws import ui
from sws.config import EngineConfig
from sws.executors import Executor
from sws.executors.shards import Shard, read_requests, write_completions
from sws.grading import GradedFn, shared_pool
from sws.llm_calls import engine_for


class LocalExecutor(Executor):
    def run_shards(self, role_name: str, role: EngineConfig, pending: list[Shard], description: str) -> None:
        with engine_for(role, self.run_dir) as engine:
            for shard in ui.track(pending, description, total=len(pending)):
                requests = read_requests(shard)
                completions = engine.generate(requests)
                if len(completions) != len(requests):
                    raise RuntimeError(f"engine {engine.name} answered {len(completions)} of {len(requests)} "
                                       "requests")
                write_completions(shard, completions)

    def map_graded(self, fn: GradedFn, items: list[Any]) -> list[Any]:
        return fn(items, shared_pool(self.verifier, self.grading.workers, self.grading.deadline_s)) if items else []
