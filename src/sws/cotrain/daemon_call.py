"""A call run on a daemon thread, which the caller may stop waiting for: a deadline passed or a Ctrl-C ends
the process without joining the thread. (The interpreter joins a ThreadPoolExecutor's workers at exit, so a
worker waiting on a server that never answers kept an interrupted run alive.)"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Generic, TypeVar

T = TypeVar("T")


class DaemonCall(Generic[T]):
    def __init__(self, fn: Callable[[], T], name: str) -> None:
        self._fn = fn
        self._outcome: Future[T] = Future()
        threading.Thread(target=self._run, name=name, daemon=True).start()

    def _run(self) -> None:
        try:
            self._outcome.set_result(self._fn())
        except BaseException as error:  # noqa: BLE001 - raised again in the caller's thread
            self._outcome.set_exception(error)

    def result(self, timeout: float | None = None) -> T:
        """What the call returned, or raises what it raised; TimeoutError when it runs past `timeout` s."""
        return self._outcome.result(timeout)
