"""Atomic file writes: a temporary file in the same folder, fsync, rename; Ctrl-C held back where it must not land.

While a stage runs, its declared output files are staged instead of renamed (`OutputSet`, pushed on
`running_stages` by `sws.runner.commit_stage`), so that the runner commits them as one set with the manifest.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import shutil
import signal
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import polars as pl

from sws.errors import UserError


def atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """Write through a temporary file in the same directory, fsync it, and rename it into place.

    Inside a running stage, a declared output is staged instead: `run_stage` renames it into place together
    with the stage's other outputs once the body has finished, then writes the manifest.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = ""
    try:
        with interrupts_deferred():  # a Ctrl-C between creating the file and owning it would leave it behind
            fd, tmp = tempfile.mkstemp(prefix=f"{TEMP_PREFIX}{path.name}.", suffix=TEMP_SUFFIX, dir=path.parent)
            os.close(fd)
        try:
            write(Path(tmp))
        except Exception as exc:
            wrapped = None if isinstance(exc, OSError) else _os_error_inside(exc, path)
            if wrapped is None:
                raise
            raise wrapped from exc
        os.chmod(tmp, 0o666 & ~_umask())
        fsync(tmp)
        with interrupts_deferred():
            staging = _stage_of(path)
            if staging is not None:
                staging.stage(path, Path(tmp))
            else:
                os.replace(tmp, path)
                fsync(path.parent)
            tmp = ""
    finally:
        with interrupts_deferred():
            if tmp and os.path.exists(tmp):
                os.unlink(tmp)


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold back Ctrl-C (SIGINT) until the block is done, so that it never lands between two steps that
    must happen together, such as creating a temporary file and taking charge of it. Nests; main thread only."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGINT) is _defer:
        yield
        return
    received: list[int] = []
    previous = signal.signal(signal.SIGINT, _defer)
    _deferred.append(received)
    try:
        yield
    finally:
        _deferred.pop()
        signal.signal(signal.SIGINT, previous)
        if received:
            signal.raise_signal(signal.SIGINT)  # delivered now, to the handler that was there before

_deferred: list[list[int]] = []


def _defer(signum: int, frame: Any) -> None:
    _deferred[-1].append(signum)

# Every temporary file sws writes is named TEMP_PREFIX + the final name + a random part + TEMP_SUFFIX, so that
# the next command can tell a killed one's leftovers from anything else (`is_temporary`, `sweep_temporaries`).
TEMP_PREFIX = ".sws-tmp."
TEMP_SUFFIX = ".tmp"


def is_temporary(name: str) -> bool:
    return name.startswith(TEMP_PREFIX) and name.endswith(TEMP_SUFFIX)

# Writers with a Rust core (polars) report an operating-system error inside their own exception type.
RUST_OS_ERROR = re.compile(r"\(os error (\d+)\)")


def _os_error_inside(exc: Exception, path: Path) -> OSError | None:
    """The OSError (full disk, ...) that a writer library wrapped in its own exception, if it did."""
    found = RUST_OS_ERROR.search(str(exc))
    if found is None:
        return None
    code = int(found.group(1))
    return OSError(code, os.strerror(code), str(path))


def _umask() -> int:
    """The process umask (mkstemp creates files 0600 whatever it is); os.umask can only swap it, so swap back."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def fsync(path: Path | str) -> None:
    """Flush a file's data, or a directory's entries (after a rename), to disk."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class OutputSet:
    """The declared file outputs of the running stage, and the staged temporary file written for each so far."""

    declared: set[Path]
    staged: dict[Path, Path] = field(default_factory=dict)

    def stage(self, final: Path, temporary: Path) -> None:
        previous = self.staged.pop(absolute(final), None)
        if previous is not None:
            previous.unlink(missing_ok=True)
        self.staged[absolute(final)] = temporary

    def commit(self) -> None:
        for final, temporary in self.staged.items():
            os.replace(temporary, final)
        for folder in {final.parent for final in self.staged}:
            fsync(folder)
        self.staged.clear()

    def discard(self) -> None:
        for temporary in self.staged.values():
            temporary.unlink(missing_ok=True)
        self.staged.clear()

running_stages: list[OutputSet] = []


def absolute(path: Path | str) -> Path:
    """The path itself, made absolute without following links: a write replaces a planted symlink, never its
    target (`os.replace` renames over the link)."""
    return Path(os.path.abspath(path))


def _stage_of(path: Path) -> OutputSet | None:
    if running_stages and absolute(path) in running_stages[-1].declared:
        return running_stages[-1]
    return None


def write_parquet(df: pl.DataFrame, path: Path) -> None:
    atomic_write(path, lambda tmp: df.write_parquet(tmp))


def write_text(path: Path, text: str) -> None:
    atomic_write(path, lambda tmp: tmp.write_text(text))


def json_text(obj: Any) -> str:
    """`obj` as sws writes JSON files (manifests, summary.json): indented, keys sorted."""
    return json.dumps(obj, indent=2, sort_keys=True, default=str) + "\n"


def write_json(path: Path, obj: Any) -> None:
    write_text(path, json_text(obj))


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> None:
    """`rows` as JSON Lines, one object a line."""
    write_text(path, "".join(json.dumps(row) + "\n" for row in rows))


def copy_file(source: Path, target: Path) -> None:
    """A copy of `source` at `target`, written atomically: a link planted at `target` is replaced."""
    atomic_write(target, lambda tmp: shutil.copyfile(source, tmp))


def open_append(path: Path) -> TextIO:
    """A log opened for appending, line-buffered; a link planted at `path` is refused, never followed."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fd = _open_own_file(Path(path), os.O_WRONLY | os.O_APPEND | os.O_CREAT, "log")
    return os.fdopen(fd, "a", buffering=1, errors="replace")


def open_lock_file(path: Path) -> int:
    """The descriptor of lock file `path`, created if missing and never truncated on opening; a link planted at
    `path` is refused, never followed."""
    return _open_own_file(Path(path), os.O_RDWR | os.O_CREAT | os.O_NONBLOCK, "lock file")


def _open_own_file(path: Path, flags: int, kind: str) -> int:
    """Open a file sws owns: never through a symbolic link, and only a regular file."""
    try:
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    except OSError as exc:
        if exc.errno != errno.ELOOP:
            raise
        raise UserError(f"{path}: a symbolic link, not sws's {kind}; remove it and rerun") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise UserError(f"{path}: not a regular file, so not sws's {kind}; remove it and rerun")
    return fd


def remove_leftover_temporaries(outputs: list[Path]) -> None:
    """Temporary files of these outputs left by a killed earlier run (one writer per run: none is in use)."""
    for output in map(Path, outputs):
        if output.parent.is_dir():
            for leftover in output.parent.glob(f"{TEMP_PREFIX}{output.name}.*{TEMP_SUFFIX}"):
                leftover.unlink(missing_ok=True)


def sweep_temporaries(root: Path) -> int:
    """Remove every temporary file under `root` (links to folders not followed): called by the one writer of a
    run when it takes the run's lock, so nothing in use is removed. Returns how many it removed."""
    removed = 0
    for folder, _, files in os.walk(root):
        for name in files:
            path = Path(folder, name)
            if is_temporary(name) and not path.is_symlink():
                path.unlink(missing_ok=True)
                removed += 1
    return removed
