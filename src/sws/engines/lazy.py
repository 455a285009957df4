"""An engine that is built on its first request: a step the request cache answers fully never loads a model
or checks a server, so it runs with the server down and costs no model load."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from sws.engines.base import Completion, Engine, Request


class LazyEngine(Engine):
    def __init__(self, build: Callable[[], Engine], name: str, model: str) -> None:
        self.build = build
        self.name = name
        self.model = model
        self.built: Engine | None = None

    def generate(self, requests: list[Request]) -> list[list[Completion]]:
        return self._engine().generate(requests)

    def generate_iter(self, requests: list[Request]) -> Iterator[tuple[int, list[Completion]]]:
        return self._engine().generate_iter(requests)

    def close(self) -> None:
        if self.built is not None:
            self.built.close()
            self.built = None

    def _engine(self) -> Engine:
        if self.built is None:
            self.built = self.build()
        return self.built
