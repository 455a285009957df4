"""Building teacher-model requests, and holding engines for a step: shared by the model-calling stages.

Every request carries a seed derived from the run's seed and the stable id of what it asks about, so reruns
ask the same questions (and the request cache and the executors' shards answer them).

Inside `shared_engines()` (all of `sws synthesize`, of `sws filter`, and one checkpoint of `sws eval`), roles
with the same engine, model and engine options get one engine, loaded once for the whole block: extractor,
generator, judges and labeler are often one model, and an in-process vLLM model takes tens of seconds to load.
Sampling settings differ per request, so they may differ. The Ray executor keeps its worker actors for the
block the same way (`held`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Protocol, TypeVar

from sws.config import EngineConfig
from sws.engines.base import Engine, Request
from sws.prompts import chat
from sws.run_dir import RunDir


class Closeable(Protocol):
    def close(self) -> None: ...


_shared: ContextVar[dict[str, Closeable] | None] = ContextVar("shared_engines", default=None)


@contextmanager
def shared_engines() -> Iterator[None]:
    """Within this block, `held` builds each key once (`engine_for`: roles with equal engine settings get one
    engine); everything built is closed at the end."""
    if _shared.get() is not None:
        yield
        return
    things: dict[str, Closeable] = {}
    token = _shared.set(things)
    try:
        yield
    finally:
        _shared.reset(token)
        for thing in things.values():
            thing.close()


T = TypeVar("T", bound=Closeable)


@contextmanager
def held(key: str, build: Callable[[], T]) -> Iterator[T]:
    """What `build` makes: inside `shared_engines()` built once per key and kept for the block, outside it
    built for this use and closed on the way out."""
    things = _shared.get()
    if things is None:
        thing = build()
        try:
            yield thing
        finally:
            thing.close()
        return
    if key not in things:
        things[key] = build()
    yield things[key]


def release_held(prefix: str, keep: str | None = None) -> None:
    """Close what the block holds under keys starting with `prefix`, but `keep`: resources another use needs."""
    things = _shared.get() or {}
    for key in [key for key in things if key.startswith(prefix) and key != keep]:
        things.pop(key).close()


def engine_for(role: EngineConfig, run_dir: Path) -> AbstractContextManager[Engine]:
    """The role's engine, behind the run's request cache; shared within a `shared_engines()` block."""
    from sws.engines import make_engine

    key = json.dumps([str(Path(run_dir).resolve()), role.engine, role.model, role.options], sort_keys=True, default=str)
    return held(f"engine:{key}", lambda: make_engine(role, RunDir(run_dir).request_cache))


def request_seed(base_seed: int, *parts: str) -> int:
    digest = hashlib.sha256("\x1f".join([str(base_seed), *parts]).encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


def attempt_role(role: EngineConfig, attempt: int) -> EngineConfig:
    """The role's sampling settings for attempt `attempt` (0: the first ask) at a reply: a retry of a role at
    temperature 0 samples at its `retry_temperature`, since at 0 a new seed would only get the same reply."""
    if attempt == 0 or role.temperature > 0:
        return role
    return role.model_copy(update={"temperature": role.retry_temperature})


def role_request(role: EngineConfig, *, task: str, fields: dict[str, Any], text: str, n: int, seed: int,
                 stop: tuple[str, ...] = ()) -> Request:
    """A chat request for a teacher role: the rendered prompt as the user message, the role's sampling settings,
    and the strings that end the reply (its template's `stop`)."""
    return Request(
        messages=chat(text), n=n, temperature=role.temperature, top_p=role.top_p, max_tokens=role.max_tokens,
        stop=stop, seed=seed, task=task, fields=fields,
    )

