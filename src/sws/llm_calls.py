"""Building teacher-model requests and sending them in shards, shared by the synthesis steps.

Requests go to the engine one shard at a time, so the request cache records each finished shard and a rerun
after a crash skips everything already answered. Every request carries a seed derived from the run's seed and
the stable id of what it asks about, so reruns ask the same questions.

Inside `shared_engines()` (all of `sws synthesize`), roles with the same engine, model and engine options get
one engine, loaded once for the whole block: extractor, generator, judges and labeler are often one model, and
an in-process vLLM model takes tens of seconds to load. Sampling settings differ per request, so they may differ.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any

from sws import ui
from sws.config import EngineConfig
from sws.engines.base import Completion, Engine, Request
from sws.prompts import chat

_shared: ContextVar[dict[str, Engine] | None] = ContextVar("shared_engines", default=None)


@contextmanager
def shared_engines() -> Iterator[None]:
    """Within this block, `engine_for` hands roles with equal engine settings one engine, closed at the end."""
    if _shared.get() is not None:
        yield
        return
    engines: dict[str, Engine] = {}
    token = _shared.set(engines)
    try:
        yield
    finally:
        _shared.reset(token)
        for engine in engines.values():
            engine.close()


@contextmanager
def engine_for(role: EngineConfig, run_dir: Path) -> Iterator[Engine]:
    """The role's engine, behind the run's request cache; closed on the way out unless it is shared."""
    from sws.engines import make_engine

    engines = _shared.get()
    if engines is None:
        engine = make_engine(role, run_dir)
        try:
            yield engine
        finally:
            engine.close()
        return
    key = json.dumps([str(Path(run_dir).resolve()), role.engine, role.model, role.options], sort_keys=True, default=str)
    if key not in engines:
        engines[key] = make_engine(role, run_dir)
    yield engines[key]


def request_seed(base_seed: int, *parts: str) -> int:
    digest = hashlib.sha256("\x1f".join([str(base_seed), *parts]).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def role_request(role: EngineConfig, *, task: str, fields: dict[str, Any], text: str, n: int, seed: int) -> Request:
    """A chat request for a teacher role: the rendered prompt as the user message, the role's sampling settings."""
    return Request(
        messages=chat(text), n=n, temperature=role.temperature, top_p=role.top_p, max_tokens=role.max_tokens,
        seed=seed, task=task, fields=fields,
    )


def generate_in_shards(
    engine: Engine, requests: Sequence[Request], shard_size: int, description: str
) -> list[list[Completion]]:
    """All completions, in request order, asking the engine `shard_size` requests at a time."""
    shards = [list(requests[start:start + shard_size]) for start in range(0, len(requests), shard_size)]
    completions: list[list[Completion]] = []
    for shard in ui.track(shards, description, total=len(shards)):
        answered = engine.generate(shard)
        if len(answered) != len(shard):
            raise RuntimeError(f"engine {engine.name} answered {len(answered)} of {len(shard)} requests")
        completions.extend(answered)
    return completions
