"""The engine protocol: a batch of requests in, `n` completions per request out, in order."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Request:
    """One generation request: chat `messages` or a raw `prompt`, sampling settings, and metadata.

    `task` and `fields` (the prompt template's inputs) are metadata: real engines ignore them, the arith oracle
    reads them. They are not part of the cache key, which depends only on what a real model would see.
    """

    messages: tuple[dict[str, str], ...] | None = None
    prompt: str | None = None
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 512
    stop: tuple[str, ...] = ()
    seed: int | None = None
    task: str = ""
    fields: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if (self.messages is None) == (self.prompt is None):
            raise ValueError("a Request needs exactly one of messages or prompt")
        if self.messages is not None and not isinstance(self.messages, tuple):
            object.__setattr__(self, "messages", tuple(self.messages))
        if not isinstance(self.stop, tuple):
            object.__setattr__(self, "stop", tuple(self.stop))


@dataclass(frozen=True)
class Completion:
    text: str
    tokens: int = 0


class Engine(Protocol):
    name: str
    model: str

    def generate(self, requests: list[Request]) -> list[list[Completion]]:
        """Return, for each request in order, exactly `request.n` completions."""
        ...

    def close(self) -> None:
        """Release processes, servers or GPU memory held by the engine."""
        ...
