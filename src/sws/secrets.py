"""Known secrets (the API keys engines resolve) and their redaction from everything sws stores or prints.

Engines call `remember_secret` with every key they resolve; completions are redacted where they enter sws (the
outermost engine wrapper, `sws.engines.fanout.SampleFanOut`, the request cache's reads of rows stored earlier, and
the answers of Ray's HTTP processor, which bypass the engine),
and messages where they leave it (`sws.ui.info` and the CLI's `error:` line). Tables, shards, the cache, manifests,
logs and exports all hold text that passed one of these points.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sws.engines.base import Completion

REDACTED = "[redacted]"
# A placeholder such as EMPTY (a local server that needs no key) is no secret, and redacting it would mangle text.
MIN_SECRET_LENGTH = 8

_known: set[str] = set()


def remember_secret(value: str | None) -> None:
    if value and len(value) >= MIN_SECRET_LENGTH:
        _known.add(value)


def redact(text: str, secrets: Iterable[str] | None = None) -> str:
    """`text` with every known secret (or each of `secrets`, in a process that has not resolved them itself, such
    as a Ray worker) replaced by REDACTED, the longest first: one key may contain another."""
    known = _known if secrets is None else {secret for secret in secrets if len(secret) >= MIN_SECRET_LENGTH}
    for secret in sorted(known, key=len, reverse=True):
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def redact_completions(completions: Iterable[Completion]) -> list[Completion]:
    return [dataclasses.replace(completion, text=redact(completion.text)) for completion in completions]
