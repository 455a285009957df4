"""Ctrl-C a command once it has reached a given point, for the tests that a waiting command ends promptly."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable

START_LIMIT_S = 600.0  # how long a loaded machine may take to bring the command to that point
# How soon after Ctrl-C the command must have ended: far below the deadline of the call it waits on (600 s in
# these tests), so a command that waits for the call fails; on an idle machine it ends within 5 s, but a CI
# machine under load takes longer just to unwind the interpreter.
PROMPT_END_S = 30.0


def interrupt_when(command: list[str], reached: Callable[[], bool], what: str,
                   settle_s: float = 1.0) -> tuple[subprocess.CompletedProcess, float]:
    """Start `command`, wait for `reached()` (`what` it is, for the failure), `settle_s` more, then send
    SIGINT; the finished command, its output captured, and the seconds from the signal to its end."""
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=os.environ.copy())
    try:
        started = time.monotonic()
        while not reached() and time.monotonic() - started < START_LIMIT_S:
            time.sleep(0.1)
        assert reached(), f"the command never reached {what}"
        time.sleep(settle_s)
        interrupted = time.monotonic()
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=PROMPT_END_S + 60)
        seconds = time.monotonic() - interrupted
        return subprocess.CompletedProcess(command, process.returncode, stdout, stderr), seconds
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
