"""The request cache: one sqlite row per (request, sample index), so a rerun after a crash makes no call twice.

The key is everything that decides what a model returns: engine, model (plus a fingerprint of a local model
folder, so a checkpoint retrained at the same path is not mistaken for the old one), the engine options that
change the text, the messages or prompt, the sampling settings, the seed and the sample index. WAL mode and a
busy timeout let several processes write the same cache at once.
Each row keeps the completion's `finish_reason`, its completion tokens and the prompt tokens it billed
(`Completion.prompt_tokens`). Rows written before it was recorded (NULL) are treated as
missing and asked again: they may be cut-off outputs that nothing can tell apart from finished ones.
Each row also keeps a digest of its key and content (`row_digest`): a row whose digest does not match, like a
cache sqlite cannot read (truncated, garbled, another schema, a folder or link in its place) or a row of the
wrong types, is one line saying to move the file away: a cache is only ever a saving, never worth a guess.
Rows written before digests were recorded (NULL) are taken as they are, as rows without prompt tokens are: the
digest guards against damage and careless edits, not against someone who recomputes it.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sws import ui
from sws.config import EngineConfig
from sws.engines.base import Completion, Engine, Request, is_count
from sws.errors import UserError
from sws.fingerprints import fingerprint
from sws.secrets import redact

# Engine options that change speed, memory or transport, never the text a model returns.
RUNTIME_OPTIONS = frozenset({
    "api_key_env", "base_url", "batch_size", "deadline", "device", "enable_prefix_caching", "enforce_eager",
    "gpu_memory_utilization", "kv_cache_memory_bytes", "max_concurrency", "max_model_len", "max_num_seqs",
    "max_retries", "pipeline_parallel_size", "retry_backoff", "swap_space", "tensor_parallel_size", "timeout",
})

_SCHEMA = """
CREATE TABLE IF NOT EXISTS completions (
    key TEXT NOT NULL,
    sample INTEGER NOT NULL,
    text TEXT NOT NULL,
    tokens INTEGER NOT NULL,
    finish_reason TEXT,
    prompt_tokens INTEGER NOT NULL DEFAULT 0,
    digest TEXT,
    PRIMARY KEY (key, sample)
)
"""
_LOOKUP_CHUNK = 500  # stays under sqlite's limit on bound parameters


def cache_identity(cfg: EngineConfig) -> dict[str, Any]:
    """The part of a cache key that comes from the engine config rather than from the request."""
    model_dir = Path(cfg.model).expanduser()
    return {
        "engine": cfg.engine,
        "model": cfg.model,
        "model_fingerprint": fingerprint(model_dir) if cfg.model and model_dir.is_dir() else None,
        "options": {name: value for name, value in sorted(cfg.options.items()) if name not in RUNTIME_OPTIONS},
    }


def request_key(identity: dict[str, Any], request: Request) -> str:
    payload = {
        **identity,
        "messages": list(request.messages) if request.messages is not None else None,
        "prompt": request.prompt,
        **request.sampling(),
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()


# The [hits, misses] of each enclosing `tally()` block (the runner opens one per stage).
_tallies: list[list[int]] = []
_tally_lock = threading.Lock()


@contextmanager
def tally() -> Iterator[list[int]]:
    """[hits, misses]: the completions every cached engine reused and generated inside this block."""
    counts = [0, 0]
    _tallies.append(counts)
    try:
        yield counts
    finally:
        _tallies.remove(counts)


class CachedEngine(Engine):
    """Wraps an engine: answers from the cache what it can, sends only the rest, stores each result as it lands.

    Identical requests in one batch are sent once. `hits` and `misses` count completions (reused / generated).
    """

    def __init__(self, engine: Engine, path: Path, identity: dict[str, Any]) -> None:
        self.engine = engine
        self.name = engine.name
        self.model = engine.model
        self.path = Path(path)
        self.identity = identity
        self.hits = 0
        self.misses = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        if self.path.is_symlink() or (self.path.exists() and not self.path.is_file()):
            raise _damaged(self.path, "not a regular file")
        with _damage_reported(self.path):
            self._db = sqlite3.connect(self.path, timeout=60, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            with self._db:
                self._db.execute(_SCHEMA)
            _add_column(self._db, "finish_reason", "TEXT")
            _add_column(self._db, "prompt_tokens", "INTEGER NOT NULL DEFAULT 0")
            _add_column(self._db, "digest", "TEXT")

    @property
    def hit_rate(self) -> float:
        total = self.hits + self.misses
        return self.hits / total if total else 0.0

    def generate(self, requests: list[Request]) -> list[list[Completion]]:
        keys = [request_key(self.identity, request) for request in requests]
        stored = self._lookup(set(keys))
        results: dict[str, list[Completion]] = {}
        todo: dict[str, Request] = {}
        for request, key in zip(requests, keys, strict=True):
            samples = stored.get(key, {})
            if all(index in samples for index in range(request.n)):
                results[key] = [samples[index] for index in range(request.n)]
            else:
                todo.setdefault(key, request)
        todo_keys = list(todo)
        for position, completions in self._call(list(todo.values())):
            self._store(todo_keys[position], completions)
            results[todo_keys[position]] = completions
        total = sum(request.n for request in requests)
        generated = sum(request.n for request in todo.values())
        self.hits += total - generated
        self.misses += generated
        with _tally_lock:
            for counts in _tallies:
                counts[0] += total - generated
                counts[1] += generated
        if total:
            ui.detail(f"request cache: {total - generated}/{total} completions reused "
                      f"({(total - generated) / total:.0%}), {self.path}")
        return [results[key] for key in keys]

    def close(self) -> None:
        self.engine.close()
        with self._lock:
            self._db.close()

    def _call(self, requests: list[Request]) -> Iterator[tuple[int, list[Completion]]]:
        if not requests:
            return
        for position, completions in self.engine.generate_iter(requests):
            if len(completions) != requests[position].n:
                raise RuntimeError(
                    f"{self.name} engine returned {len(completions)} completions for a request with "
                    f"n={requests[position].n}"
                )
            yield position, completions

    def _lookup(self, keys: set[str]) -> dict[str, dict[int, Completion]]:
        found: dict[str, dict[int, Completion]] = {}
        ordered = sorted(keys)
        with self._lock, _damage_reported(self.path):
            for start in range(0, len(ordered), _LOOKUP_CHUNK):
                chunk = ordered[start:start + _LOOKUP_CHUNK]
                rows = self._db.execute(
                    f"SELECT key, sample, text, tokens, finish_reason, prompt_tokens, digest FROM completions "
                    f"WHERE finish_reason IS NOT NULL AND key IN ({','.join('?' * len(chunk))})",
                    chunk,
                )
                for key, sample, text, tokens, finish_reason, prompt_tokens, digest in rows:
                    if not (is_count(sample) and isinstance(text, str) and is_count(tokens)
                            and isinstance(finish_reason, str) and is_count(prompt_tokens)):
                        raise _damaged(self.path, "a row whose sample, text, tokens, finish_reason or prompt_tokens "
                                                  "has the wrong type")
                    if digest is not None and digest != row_digest(key, sample, text, tokens, finish_reason, prompt_tokens):
                        raise _damaged(self.path, "a row whose content does not match its digest")
                    found.setdefault(key, {})[sample] = Completion(redact(text), tokens, finish_reason, prompt_tokens)
        return found

    def _store(self, key: str, completions: list[Completion]) -> None:
        rows = [(key, index, completion.text, completion.tokens, completion.finish_reason, completion.prompt_tokens)
                for index, completion in enumerate(completions)]
        with self._lock, _damage_reported(self.path), self._db:
            self._db.executemany(
                "INSERT OR REPLACE INTO completions (key, sample, text, tokens, finish_reason, prompt_tokens, digest) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(*row, row_digest(*row)) for row in rows],
            )


def row_digest(key: str, sample: int, text: str, tokens: int, finish_reason: str | None, prompt_tokens: int) -> str:
    """What a row's content hashes to: an edited text, count or key no longer matches it."""
    content = json.dumps([key, sample, text, tokens, finish_reason, prompt_tokens], ensure_ascii=False)
    return hashlib.sha256(content.encode("utf-8", "surrogatepass")).hexdigest()


def check_cache(path: Path) -> None:
    """The checks opening the cache makes, and sqlite's own integrity check, for a step that needs no request:
    a damaged cache is said when it is damaged, not in a later step that happens to ask. Once per process for
    a file that has not changed since."""
    path = Path(path)
    if path.is_symlink() or (path.exists() and not path.is_file()):
        raise _damaged(path, "not a regular file")
    if path.exists():
        stat = path.stat()
        _check_cache_once(path, stat.st_size, stat.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _check_cache_once(path: Path, size: int, mtime_ns: int) -> None:
    with _damage_reported(path), contextlib.closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as db:
        columns = {row[1] for row in db.execute("PRAGMA table_info(completions)")}
        if not {"key", "sample", "text", "tokens"} <= columns:
            raise _damaged(path, "no completions table of sws's schema")
        verdict = db.execute("PRAGMA quick_check").fetchone()
        if verdict is None or verdict[0] != "ok":
            raise _damaged(path, f"integrity check: {verdict[0] if verdict else 'no answer'}")


def _damaged(path: Path, reason: str) -> UserError:
    return UserError(f"{path}: damaged request cache ({reason}); move it away and rerun")


@contextmanager
def _damage_reported(path: Path) -> Iterator[None]:
    """Any sqlite error (a truncated or garbled file, another schema, a read-only mount) as one line."""
    try:
        yield
    except sqlite3.Error as exc:
        reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if isinstance(exc, sqlite3.OperationalError) and not _writable(path):
            # A healthy cache on a read-only mount fails the same way a damaged one does; it is not damaged.
            raise UserError(f"{path}: cannot write the request cache ({reason}): it or its folder is read-only; "
                            "make it writable, or copy the run to a writable disk") from None
        raise _damaged(path, reason) from None


def _writable(path: Path) -> bool:
    return os.access(path.parent, os.W_OK) and (not path.exists() or os.access(path, os.W_OK))


def _add_column(db: sqlite3.Connection, name: str, declaration: str) -> None:
    """Upgrade a cache written before column `name` was recorded (finish_reason: old rows stay NULL and are asked
    again; prompt_tokens: old rows count 0)."""
    if name in {row[1] for row in db.execute("PRAGMA table_info(completions)")}:
        return
    try:
        with db:
            db.execute(f"ALTER TABLE completions ADD COLUMN {name} {declaration}")
    except sqlite3.OperationalError as exc:  # another process added it first
        if "duplicate column" not in str(exc):
            raise
