"""Where a step's model calls and grading run: in this process (`local`, the default) or on a Ray cluster (`ray`).

A stage builds its requests, reads its inputs and writes its outputs and manifest itself; an executor only runs
the step's bodies: requests to completions (`complete`), and items to graded results (`map_graded`, a function
of a batch of items and a `GradingPool`). So the two executors write the same artifacts, row for row, whenever
the engine is deterministic. Grading uses the verifier of the pipeline's world.

Both resume the same way: a step's requests are cut into shards (`sws.executors.shards`), each shard's
completions are written to the run directory with a completion marker, and a rerun reads the shards that
have one and runs only the others. Under that, the local engine answers through the run's request cache, so
a crash inside a shard repeats at most the requests that were in flight.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from sws import tokens, ui
from sws.config import EngineConfig, PipelineConfig
from sws.current_policy import resolved
from sws.engines.base import Completion, Request
from sws.engines.cache import cache_identity, check_cache
from sws.executors.shards import Shard, plan_shards, read_completions, shard_tokens, shards_dir
from sws.grading import GradedFn
from sws.run_dir import RunDir
from sws.world import get_world


class Executor:
    """The shard plan and its resume, shared by every executor; a subclass runs the pending shards."""

    def __init__(self, cfg: PipelineConfig, run_dir: Path) -> None:
        self.settings = cfg.executor
        self.grading = cfg.grading
        self.verifier = get_world(cfg.world).verifier
        self.run_dir = Path(run_dir).resolve()

    def complete(self, role_name: str, role: EngineConfig, requests: list[Request], shard_size: int,
                 description: str) -> list[list[Completion]]:
        """Every request's completions, in request order; `role_name` picks the role's `executor.roles` entry."""
        return list(self.stream(role_name, role, requests, shard_size, description))

    def stream(self, role_name: str, role: EngineConfig, requests: Iterable[Request], shard_size: int,
               description: str) -> Iterator[list[Completion]]:
        """`complete` for requests that come one at a time: one shard of them, or of answers, in memory."""
        role = resolved(role, self.run_dir, f"roles.{role_name}.model")
        folder = shards_dir(self.run_dir)
        shards = plan_shards(folder, cache_identity(role), requests, shard_size)
        pending = [shard for shard in shards if not shard.done]
        if len(pending) < len(shards):
            ui.info(f"{description}: {len(shards) - len(pending)} of {len(shards)} shards already done in {folder}; "
                    f"running the other {len(pending)}")
        if not pending:
            check_cache(RunDir(self.run_dir).request_cache)
        if pending and not tokens.capping():
            self.run_shards(role_name, role, pending, description)
        elif pending:
            self.run_capped(role_name, role, shards, pending, description)
        for completions in read_completions(shards):
            tokens.record(role_name, [completions])
            yield completions

    def run_capped(self, role_name: str, role: EngineConfig, shards: list[Shard], pending: list[Shard],
                   description: str) -> None:
        """`run_shards` in waves of the shards it runs at once, asking the spending cap before each wave: a wave
        in flight finishes and is written, the next is not started."""
        since = shard_tokens(role_name, [shard for shard in shards if shard.done])
        wave = self.shards_at_once(role_name)
        for start in range(0, len(pending), wave):
            tokens.check_cap(since)
            self.run_shards(role_name, role, pending[start:start + wave], description)
            since = tokens.add(since, shard_tokens(role_name, pending[start:start + wave]))

    def run_shards(self, role_name: str, role: EngineConfig, pending: list[Shard], description: str) -> None:
        """Write the completions and marker of every pending shard."""
        raise NotImplementedError

    def shards_at_once(self, role_name: str) -> int:
        """How many shards `run_shards` runs side by side."""
        return 1

    def map_graded(self, fn: GradedFn, items: list[Any]) -> list[Any]:
        """`fn` over the items in batches, each batch graded by a pool of spawned grading processes that grade with
        the world's verifier."""
        raise NotImplementedError


def executor_for(cfg: PipelineConfig, run_dir: Path) -> Executor:
    if cfg.executor.kind == "ray":
        from sws.executors.ray_executor import RayExecutor

        return RayExecutor(cfg, run_dir)
    from sws.executors.local import LocalExecutor

    return LocalExecutor(cfg, run_dir)
