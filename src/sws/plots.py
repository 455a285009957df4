"""Matplotlib helpers shared by every stage that draws: figures built without pyplot, saved as PNG atomically.

Figures are plain `matplotlib.figure.Figure` objects rendered by the Agg canvas, so drawing needs no display,
touches no global pyplot state and is safe in tests and worker processes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sws.atomic_files import atomic_write

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

DPI = 120


def new_figure(width: float = 7.0, height: float = 4.0) -> tuple[Figure, Axes]:
    """A figure with one set of axes, attached to the Agg canvas."""
    # matplotlib loads on the first figure, so commands that draw none start fast.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=DPI, layout="constrained")
    FigureCanvasAgg(figure)
    return figure, figure.add_subplot()


def save_figure(figure: Figure, path: Path) -> Path:
    """Write `figure` as a PNG at `path` (atomically; parent folders created)."""
    path = Path(path)
    atomic_write(path, lambda tmp: figure.savefig(tmp, format="png"))
    return path


def bar_chart(
    values: Mapping[str, float], *, title: str, ylabel: str, ylim: tuple[float, float] | None = None
) -> Figure:
    """Vertical bars, one per name, in the mapping's order, each labelled with its value."""
    figure, axes = new_figure(width=max(5.0, 0.9 * len(values) + 2.0))
    bars = axes.bar(list(values), list(values.values()), color="tab:blue")
    axes.bar_label(bars, fmt="%.2f", fontsize=8)
    axes.set_title(title)
    axes.set_ylabel(ylabel)
    if ylim is not None:
        axes.set_ylim(*ylim)
    axes.tick_params(axis="x", labelrotation=30)
    return figure


def line_chart(
    series: Mapping[str, Sequence[float]],
    *,
    title: str,
    xlabel: str,
    ylabel: str,
    ylim: tuple[float, float] | None = None,
    empty_note: str = "no data",
) -> Figure:
    """One line per named series, plotted against its positions 0, 1, …; a note in place of an empty plot."""
    figure, axes = new_figure()
    for name, values in series.items():
        axes.plot(range(len(values)), values, marker="o", markersize=3, linewidth=1, label=name)
    if series:
        axes.legend(fontsize=7, loc="best", ncols=2)
    else:
        axes.text(0.5, 0.5, empty_note, ha="center", va="center", transform=axes.transAxes)
    axes.set_title(title)
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    if ylim is not None:
        axes.set_ylim(*ylim)
    return figure
