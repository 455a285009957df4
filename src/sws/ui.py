"""Console output shared by every command: messages and progress bars on stderr, silenced by --quiet."""

from collections.abc import Iterable, Iterator
from typing import TextIO, TypeVar

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

T = TypeVar("T")

console = Console(stderr=True, highlight=False)
_quiet = False


def set_quiet(quiet: bool) -> None:
    global _quiet
    _quiet = quiet
    console.quiet = quiet


def log_to(stream: TextIO) -> None:
    """Send messages and progress bars to `stream` (e.g. a worker process's log file) instead of stderr."""
    global console
    console = Console(file=stream, highlight=False, quiet=_quiet)


def info(message: str) -> None:
    console.print(message)


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
