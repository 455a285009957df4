"""Calls run on daemon threads, so that Ctrl-C ends the process at once.

`concurrent.futures.ThreadPoolExecutor` joins its threads when the interpreter exits: an interrupt would wait
for every request in flight, which a slow or hostile server can hold for minutes.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import TypeVar

Item = TypeVar("Item")
Result = TypeVar("Result")

_POLL_S = 0.2  # how often the waiting thread wakes, so that a signal is handled promptly


def unordered_map(function: Callable[[Item], Result], items: Sequence[Item],
                  workers: int) -> Iterator[tuple[int, Result]]:
    """(index, function(item)) for each item as it finishes, on at most `workers` daemon threads. The first
    exception is raised here; once the caller stops (an exception, an interrupt, the generator closed), no
    further item starts and the calls in flight are left to end on their own."""
    todo: queue.SimpleQueue[tuple[int, Item]] = queue.SimpleQueue()
    for index, item in enumerate(items):
        todo.put((index, item))
    done: queue.SimpleQueue[tuple[int, bool, object]] = queue.SimpleQueue()
    stopped = threading.Event()

    def work() -> None:
        while not stopped.is_set():
            try:
                index, item = todo.get_nowait()
            except queue.Empty:
                return
            try:
                done.put((index, True, function(item)))
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread, which raises it
                done.put((index, False, exc))

    for _ in range(max(1, min(workers, len(items)))):
        threading.Thread(target=work, daemon=True).start()
    try:
        for _ in range(len(items)):
            while True:
                try:
                    index, ok, value = done.get(timeout=_POLL_S)
                    break
                except queue.Empty:
                    continue
            if not ok:
                raise value  # type: ignore[misc]
            yield index, value  # type: ignore[misc]
    finally:
        stopped.set()
