"""Independent pieces of work at once, one worker process each, with their progress bars shown here.

Each worker sends its messages and the libraries' output to its own log file; this process shows one progress
bar per task from a status file the worker rewrites (`{"step", "total", "rate"}`, as trainers write
`progress.json`). A failing task raises here after the others have finished, so none of their work is lost.
"""

from __future__ import annotations

import ctypes
import json
import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sws import ui
from sws.atomic_files import open_append

POLL_SECONDS = 0.5
PR_SET_PDEATHSIG = 1  # linux/prctl.h


@dataclass(frozen=True)
class Task:
    """`function(*args)` in a worker; `function` must be importable by name (a module-level function)."""

    name: str
    function: Callable[..., Any]
    args: tuple
    log: Path
    status: Path


def run_side_by_side(tasks: list[Task]) -> list[Any]:
    """Every task's return value, in the order of `tasks`."""
    for task in tasks:
        task.status.unlink(missing_ok=True)
    ui.info(f"{' and '.join(task.name for task in tasks)}: side by side, one process each; logs in "
            + ", ".join(str(task.log) for task in tasks))
    # spawn: a forked copy of a process that has started torch threads can hang
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=len(tasks), mp_context=context) as pool:
        futures = [pool.submit(_call_logged, task.log, task.function, task.args) for task in tasks]
        _show_progress(tasks, futures)
        return [future.result() for future in futures]


def _end_with_parent() -> None:
    """Ask Linux to end this worker when the process that started it dies (killed, say): a pool worker outlives
    its parent otherwise, and an orphaned trainer goes on taking a core."""
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() == 1:  # the parent died before the request took effect
            os._exit(1)


def _call_logged(log: Path, function: Callable[..., Any], args: tuple) -> Any:
    _end_with_parent()
    with open_append(log) as stream:
        os.dup2(stream.fileno(), 1)
        os.dup2(stream.fileno(), 2)
        ui.log_to(stream)
        return function(*args)


def _show_progress(tasks: list[Task], futures: list[Future]) -> None:
    with ui.progress_bar() as bar:
        bars = [bar.add_task(task.name, total=None, rate="") for task in tasks]
        while True:
            finished = all(future.done() for future in futures)
            for task, task_bar in zip(tasks, bars, strict=True):
                status = _read_status(task.status)
                if status is not None:
                    bar.update(task_bar, completed=status["step"], total=status["total"], rate=status["rate"])
            if finished:
                return
            time.sleep(POLL_SECONDS)


def _read_status(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
