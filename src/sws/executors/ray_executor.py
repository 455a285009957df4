"""The Ray executor: a step's shards of requests, and its grading, on a pool of worker actors kept for the step.

Completions: the step's shards without a marker (`sws.executors.shards`) go to the first
`executor.roles.<role>.replicas` workers, each loading a role's engine on its first shard and keeping it; a
worker writes each shard's completions to the run directory, and only shard names come back to the driver,
which then reads the shards in request order. GPU vLLM teachers and OpenAI-compatible endpoints go through
`ray.data.llm` instead (`sws.executors.ray_llm`), and write the same shards.
Grading: batches of items on the same workers, each owning one spawned grading process with the world's verifier
and the pipeline's deadline (math-verify's signal-based timeouts do not work in Ray's worker threads); a pair
past it comes back ungraded (None), as on the local executor.

The workers are held like engines (`sws.llm_calls.held`): inside `shared_engines()` (a whole `sws synthesize`
or `sws filter`) one pool serves every call, so engines load once per step and no call waits for actors to
start. A Ray Data actor pool would start anew for each call, and a step makes several. A worker whose process
dies is restarted by Ray and its task retried; shards are written whole or not at all, so nothing doubles.
"""

from __future__ import annotations

import json
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from sws import ui
from sws.config import EngineConfig, PipelineConfig, RoleResources
from sws.engines import engine_class
from sws.engines.base import Engine, RayLLM
from sws.executors import Executor
from sws.executors.ray_cluster import check_gpus, connect, require_ray
from sws.executors.shards import (
    Shard,
    read_requests,
    shards_dir,
    write_completions,
)
from sws.grading import GradedFn, GradingPool
from sws.llm_calls import held, release_held
from sws.verifier import Verifier

# Grading batches per worker: small enough to balance the pool, large enough to amortise a task.
GRADING_BATCHES_PER_WORKER = 4
HELD_PREFIX = "ray-workers:"
CLOSE_TIMEOUT_S = 5.0
_announced: set[str] = set()  # settings already told that the cluster has room for fewer workers


class Worker:
    """A Ray actor: the engines it was asked for (one per engine setting), and a one-process grading pool."""

    def __init__(self) -> None:
        self.engines: dict[str, Engine] = {}
        self.grading: GradingPool | None = None

    def answer(self, role: dict[str, Any], folder: str, name: str, start: int, size: int) -> str:
        shard = Shard(Path(folder), name, start, size)
        if shard.done:  # a retried task whose first try got as far as the marker
            return name
        engine = self._engine(role)
        requests = read_requests(shard)
        completions = engine.generate(requests)
        if len(completions) != len(requests):
            raise RuntimeError(f"engine {engine.name} answered {len(completions)} of {len(requests)} requests")
        write_completions(shard, completions)
        return name

    def grade(self, fn: GradedFn, items: list[Any], verifier: Verifier, deadline_s: float) -> list[Any]:
        if self.grading is None or (self.grading.verifier, self.grading.deadline_s) != (verifier, deadline_s):
            if self.grading is not None:
                self.grading.close()
            self.grading = GradingPool(verifier, workers=1, deadline_s=deadline_s)
        return fn(items, self.grading)

    def close(self) -> None:
        for engine in self.engines.values():
            engine.close()
        if self.grading is not None:
            self.grading.close()

    def _engine(self, role: dict[str, Any]) -> Engine:
        from sws.engines import make_engine

        key = json.dumps(role, sort_keys=True)
        if key not in self.engines:
            self.engines[key] = make_engine(EngineConfig.model_validate(role))
        return self.engines[key]


class WorkerPool:
    """Worker actors of one shape (CPUs and GPUs each), started as calls ask for more of them."""

    def __init__(self, cpus: float, gpus: float) -> None:
        ray = require_ray()
        self.actor_class = ray.remote(Worker).options(num_cpus=cpus, num_gpus=gpus, max_restarts=-1,
                                                      max_task_retries=-1)
        self.actors: list[Any] = []

    def take(self, count: int) -> Any:
        """A `ray.util.ActorPool` of the first `count` workers."""
        from ray.util import ActorPool

        while len(self.actors) < count:
            self.actors.append(self.actor_class.remote())
        return ActorPool(self.actors[:count])

    def close(self) -> None:
        ray = require_ray()
        try:  # a worker still busy (after Ctrl-C) is not waited for: its grading process ends with its pipe
            ray.get([actor.close.remote() for actor in self.actors], timeout=CLOSE_TIMEOUT_S)
        except ray.exceptions.RayError:
            pass  # the actors are killed below, whatever state they are in
        for actor in self.actors:
            ray.kill(actor)
        self.actors = []


def workers(gpus: float) -> AbstractContextManager[WorkerPool]:
    """The block's pool of CPU workers (one CPU each), or of GPU workers with `gpus` each and no CPU claim.

    A GPU pool of another size is closed first: both would claim the same GPUs.
    """
    if not gpus:
        return held(f"{HELD_PREFIX}cpu", lambda: WorkerPool(cpus=1, gpus=0))
    key = f"{HELD_PREFIX}gpu:{gpus:g}"
    release_held(f"{HELD_PREFIX}gpu:", keep=key)
    return held(key, lambda: WorkerPool(cpus=0, gpus=gpus))


def placeable(count: int, gpus: float, setting: str | None) -> int:
    """At most as many workers as the cluster can place at once (tasks for the others would wait forever);
    says so when a `setting` the user gave asks for more."""
    resources = require_ray().cluster_resources()
    room = max(1, int(resources.get("GPU", 0) // gpus) if gpus else int(resources.get("CPU", 1)))
    if count > room and setting is not None and setting not in _announced:
        _announced.add(setting)
        ui.info(f"{setting}: {count} workers asked for, the Ray cluster has room for {room}; using {room}")
    return min(count, room)


class RayExecutor(Executor):
    def __init__(self, cfg: PipelineConfig, run_dir: Path) -> None:
        super().__init__(cfg, run_dir)
        connect(self.settings.address)

    def run_shards(self, role_name: str, role: EngineConfig, pending: list[Shard], description: str) -> None:
        resources = self.settings.roles.get(role_name, RoleResources())
        check_gpus(role_name, resources.gpus)
        self._run_shards(role_name, role, resources, shards_dir(self.run_dir), pending, description)

    def shards_at_once(self, role_name: str) -> int:
        return self.settings.roles.get(role_name, RoleResources()).replicas

    def _run_shards(self, role_name: str, role: EngineConfig, resources: RoleResources, folder: Path,
                    pending: list[Shard], description: str) -> None:
        track = f"{description} (ray, {role_name})"
        chat = read_requests(pending[0])[0].messages is not None
        adapter = engine_class(role.engine).ray_llm(role, resources.replicas, resources.gpus, chat)
        if adapter is not None:
            self._run_on_ray_llm(adapter, folder, pending, track)
            return
        settings = role.model_dump(mode="json")
        with workers(resources.gpus) as pool:
            setting = f"executor.roles.{role_name}.replicas"
            written = pool.take(placeable(min(resources.replicas, len(pending)), resources.gpus, setting)).map_unordered(
                lambda actor, shard: actor.answer.remote(settings, str(folder), shard.name, shard.start, shard.size),
                pending)
            for _ in ui.track(written, track, total=len(pending)):
                pass

    def _run_on_ray_llm(self, adapter: RayLLM, folder: Path, pending: list[Shard], track: str) -> None:
        from sws.executors.ray_llm import complete_with_ray_llm

        ray = require_ray()
        release_held(HELD_PREFIX)  # its replicas need the CPUs and GPUs that held workers claim
        shards = ray.data.from_items([{"name": s.name, "start": s.start, "size": s.size} for s in pending],
                                     override_num_blocks=len(pending))
        written = complete_with_ray_llm(shards, adapter, str(folder))
        for _ in ui.track(written.iter_rows(), track, total=len(pending)):
            pass

    def map_graded(self, fn: GradedFn, items: list[Any]) -> list[Any]:
        if not items:
            return []
        asked = self.grading.workers  # None: as many as the cluster's CPUs
        count = placeable(min(asked or len(items), len(items)), gpus=0, setting="grading.workers" if asked else None)
        size = max(1, -(-len(items) // (count * GRADING_BATCHES_PER_WORKER)))
        batches = [items[start:start + size] for start in range(0, len(items), size)]
        verifier, deadline_s = self.verifier, self.grading.deadline_s
        with workers(gpus=0) as pool:
            graded = pool.take(count).map(lambda actor, batch: actor.grade.remote(fn, batch, verifier, deadline_s),
                                          batches)
            return [result for results in graded for result in results]

