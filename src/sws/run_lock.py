"""One writer per run directory: the command that writes a run holds `<run>/.sws.lock`.

The lock is an advisory `flock` on that file, which the kernel releases when its holder dies however it dies,
so a killed command never blocks the next one. The file's content names the holder (pid, host, command,
start time) for the message a second command prints; content left behind by a dead holder is reported when
the next command takes the lock over. The file is never deleted: deleting a lock file that another process
has open would let two commands hold "the" lock at once.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sws import ui
from sws.atomic_files import open_lock_file, sweep_temporaries
from sws.errors import UserError
from sws.run_dir import RunDir

LOCK_NAME = ".sws.lock"




def _describe(holder: dict[str, Any]) -> str:
    fields = {name: _shown(holder.get(name, "?")) for name in ("pid", "host", "command", "since")}
    return f"pid {fields['pid']} on {fields['host']} (`{fields['command']}`, since {fields['since']})"


def _shown(value: object) -> str:
    """A field of the lock file as the terminal may show it: anyone who can write the run can write the lock
    file, so control and bidi characters (an ANSI escape, a right-to-left override) are printed escaped."""
    text = str(value)[:200]
    return "".join(char if char.isprintable() else ascii(char)[1:-1] for char in text)


def _read_holder(fd: int) -> dict[str, Any] | None:
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 1 << 16).decode(errors="replace").strip()
    if not text:
        return None
    try:
        holder = json.loads(text)
    except json.JSONDecodeError:
        return {"command": text[:80]}
    return holder if isinstance(holder, dict) else {"command": text[:80]}


@contextmanager
def run_lock(run_dir: Path, command: str | None = None) -> Iterator[None]:
    """Hold the run's lock for the duration; a second holder gets a UserError naming the first at once."""
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    path = RunDir(run_dir).lock
    fd = open_lock_file(path)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd) or {}
            raise UserError(f"{run_dir}: in use by {_describe(holder)}; wait for it to finish, "
                            "or use another --run") from None
        RunDir(run_dir).check_folder_links()
        stale = _read_holder(fd)
        if stale is not None:
            ui.info(f"{path}: took over the lock of {_describe(stale)}, which is no longer running")
        sweep_temporaries(run_dir)  # a killed command's half-written files: this holder is the run's one writer
        me = {"pid": os.getpid(), "host": socket.gethostname(),
              "command": command or " ".join(["sws", *sys.argv[1:]]),
              "since": time.strftime("%Y-%m-%dT%H:%M:%S")}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(me) + "\n").encode(), 0)
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
    finally:
        os.close(fd)
