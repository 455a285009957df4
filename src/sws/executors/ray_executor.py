"""The Ray executor: a step's requests and grading as Ray Data pipelines, streamed through actor pools.

Completions: the step's shards without a marker (`sws.executors.shards`) flow through a pool of
`executor.roles.<role>.replicas` actors, each holding one engine for the whole step and writing each shard's
completions to the run directory; only the shard names come back to the driver, which then reads the shards
in request order. GPU vLLM teachers and OpenAI-compatible endpoints go through `ray.data.llm` instead
(`sws.executors.ray_llm`), and write the same shards.
Grading: batches of items through a pool of CPU actors, each owning a `GradingPool` of one spawned process
with the pipeline's deadline (math-verify's signal-based timeouts do not work in Ray's worker threads); a pair
past it comes back ungraded (None), as on the local executor.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from sws import ui
from sws.config import EngineConfig, PipelineConfig, RoleResources
from sws.engines import initial_checkpoint
from sws.engines.base import Completion, Request
from sws.engines.cache import cache_identity
from sws.executors import GradedFn
from sws.executors.ray_cluster import check_gpus, connect, require_ray
from sws.executors.shards import (
    Shard,
    plan_shards,
    read_completions,
    read_requests,
    shards_dir,
    write_completions,
)
from sws.grading import GradingPool

# Grading batches per actor: small enough to balance the pool, large enough to amortise a task.
GRADING_BATCHES_PER_ACTOR = 4


class EngineWorker:
    """A Ray Data actor: one engine for the step; answers a batch of shard names by writing their completions."""

    def __init__(self, role: dict[str, Any], folder: str) -> None:
        from sws.engines import make_engine

        self.engine = make_engine(EngineConfig.model_validate(role))
        self.folder = Path(folder)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        for name, start, size in zip(batch["name"], batch["start"], batch["size"], strict=True):
            shard = Shard(self.folder, str(name), int(start), int(size))
            if shard.done:  # a retried task whose first try got as far as the marker
                continue
            requests = read_requests(shard)
            completions = self.engine.generate(requests)
            if len(completions) != len(requests):
                raise RuntimeError(f"engine {self.engine.name} answered {len(completions)} of {len(requests)} requests")
            write_completions(shard, completions)
        return {"name": batch["name"]}


class GradingWorker:
    """A Ray Data actor owning a one-process `GradingPool`; applies a grading body to a batch of JSON items."""

    def __init__(self, fn: GradedFn, deadline_s: float) -> None:
        self.fn = fn
        self.pool = GradingPool(workers=1, deadline_s=deadline_s)

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        results = self.fn([json.loads(item) for item in batch["item"]], self.pool)
        return {"index": batch["index"], "result": np.array([json.dumps(result) for result in results])}


class RayExecutor:
    def __init__(self, cfg: PipelineConfig, run_dir: Path) -> None:
        self.settings = cfg.executor
        self.grading = cfg.grading
        self.run_dir = Path(run_dir).resolve()
        connect(self.settings.address)

    def complete(self, role_name: str, role: EngineConfig, requests: list[Request], shard_size: int,
                 description: str) -> list[list[Completion]]:
        return list(self.stream(role_name, role, requests, shard_size, description))

    def stream(self, role_name: str, role: EngineConfig, requests: Iterable[Request], shard_size: int,
               description: str) -> Iterator[list[Completion]]:
        """`complete` for requests that come one at a time: the driver holds one shard of them, or of answers."""
        resources = self.settings.roles.get(role_name, RoleResources())
        check_gpus(role_name, resources.gpus)
        if not role.model:
            role = role.model_copy(update={"model": str(initial_checkpoint(self.run_dir))})
        folder = shards_dir(self.run_dir)
        shards = plan_shards(folder, cache_identity(role), requests, shard_size)
        pending = [shard for shard in shards if not shard.done]
        if len(pending) < len(shards):
            ui.info(f"{description}: {len(shards) - len(pending)} of {len(shards)} shards already done in {folder}; "
                    f"running the other {len(pending)}")
        if pending:
            self._run_shards(role_name, role, resources, folder, pending, description)
        return read_completions(shards)

    def _run_shards(self, role_name: str, role: EngineConfig, resources: RoleResources, folder: Path,
                    pending: list[Shard], description: str) -> None:
        ray = require_ray()
        shards = ray.data.from_items([{"name": s.name, "start": s.start, "size": s.size} for s in pending],
                                     override_num_blocks=len(pending))
        if uses_ray_llm(role, resources):
            from sws.executors.ray_llm import complete_with_ray_llm

            chat = read_requests(pending[0])[0].messages is not None
            written = complete_with_ray_llm(shards, role, resources, str(folder), chat)
        else:
            written = shards.map_batches(
                EngineWorker, fn_constructor_kwargs={"role": role.model_dump(mode="json"), "folder": str(folder)},
                batch_size=1, batch_format="numpy", compute=ray.data.ActorPoolStrategy(size=resources.replicas),
                num_cpus=0 if resources.gpus else 1, num_gpus=resources.gpus,
            )
        for _ in ui.track(written.iter_rows(), f"{description} (ray, {role_name})", total=len(pending)):
            pass

    def map_graded(self, fn: GradedFn, items: list[Any]) -> list[Any]:
        if not items:
            return []
        ray = require_ray()
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        actors = min(self.grading.workers or cpus, cpus)  # one CPU each: more could never all be placed
        batch_size = max(1, -(-len(items) // (actors * GRADING_BATCHES_PER_ACTOR)))
        graded = ray.data.from_items(
            [{"index": index, "item": json.dumps(item)} for index, item in enumerate(items)],
        ).map_batches(
            GradingWorker, fn_constructor_kwargs={"fn": fn, "deadline_s": self.grading.deadline_s},
            batch_size=batch_size, batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=min(actors, len(items))), num_cpus=1,
        )
        results: list[Any] = [None] * len(items)
        for row in graded.iter_rows():
            results[int(row["index"])] = json.loads(row["result"])
        return results


def uses_ray_llm(role: EngineConfig, resources: RoleResources) -> bool:
    """GPU vLLM teachers and OpenAI-compatible endpoints run through `ray.data.llm`; other engines in actors."""
    return (role.engine == "vllm" and resources.gpus > 0) or role.engine == "openai"
