"""Console output shared by every command: messages and progress bars on stderr, silenced by --quiet; details
(each request batch's cache use) only with --verbose. Written to a file or a pipe (a Slurm or CI log), tables get
a wide console so that no column is cut."""

import sys
from collections.abc import Iterable, Iterator
from typing import TextIO, TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from sws.secrets import redact

T = TypeVar("T")

# Columns of a console that is not a terminal (rich would assume 80 and cut the tables).
LOG_WIDTH = 250


def width_for(stream: TextIO) -> int | None:
    """None (the terminal's own width) on a terminal, else LOG_WIDTH."""
    return None if stream.isatty() else LOG_WIDTH


def stdout_console() -> Console:
    """A console for the tables a command prints on stdout."""
    return Console(width=width_for(sys.stdout))


console = Console(stderr=True, highlight=False, width=width_for(sys.stderr))
_quiet = False
_verbose = False


def set_verbosity(quiet: bool, verbose: bool = False) -> None:
    """--quiet: no messages or progress bars; --verbose: details too. --quiet wins."""
    global _quiet, _verbose
    _quiet = quiet
    _verbose = verbose and not quiet
    console.quiet = quiet


def log_to(stream: TextIO) -> None:
    """Send messages and progress bars to `stream` (e.g. a worker process's log file) instead of stderr."""
    global console
    console = Console(file=stream, highlight=False, quiet=_quiet, width=width_for(stream))


def info(message: str) -> None:
    console.print(redact(message))


def detail(message: str) -> None:
    """A message shown only with --verbose."""
    if _verbose:
        info(message)


def progress_bar() -> Progress:
    """A bar with counts, rate and elapsed time; callers add tasks and advance them."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rate]}"),
        TimeElapsedColumn(),
        console=console,
        disable=_quiet,
        transient=False,
    )


def track(items: Iterable[T], description: str, total: int | None = None) -> Iterator[T]:
    """Iterate with a progress bar showing done/total and items per second."""
    with progress_bar() as bar:
        task = bar.add_task(description, total=total, rate="")
        for item in items:
            yield item
            bar.advance(task)
            speed = bar.tasks[0].speed
            if speed:
                bar.update(task, rate=f"{speed:.1f}/s")
