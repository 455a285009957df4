"""`sws compare RUN...`: augmented − baseline across runs of one pipeline (seeds), with their mean and spread.

One run measures its difference on a few hundred weak problems, so a single seed's gain is mostly noise; the
paper's claim is about what holds over seeds. Each run contributes the overall shares from its `summary.json`
(written by `sws eval`): on the weak problems, and in the arith world on fresh problems of their families.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table

from sws.config import load_config, run_config_path
from sws.errors import UserError
from sws.stages.evaluate import HEADLINE_CHECKPOINTS, read_summary, summary_path

# summary.json prefix -> column title of its augmented − baseline
GAPS = {"weak_solved": "aug − base", "weak_like_solved": "aug − base, fresh"}
CAPTIONS = {"weak_solved": "aug − base: augmented − baseline, in points",
            "weak_like_solved": "fresh: on fresh problems of the weak problems' families"}


@dataclass(frozen=True)
class RunResult:
    run: Path
    seed: int | None  # from the run's config.yaml
    solved: dict[str, float | None]  # checkpoint -> overall share of weak problems solved
    gaps: dict[str, float | None]  # GAPS prefix -> augmented − baseline, overall; None when not measured


def run_result(run_dir: Path) -> RunResult:
    """The overall shares and differences of one evaluated run; a UserError names what is missing."""
    summary = read_summary(run_dir)
    for checkpoint in ("baseline", "augmented"):
        if f"weak_solved_{checkpoint}" not in summary:
            raise UserError(f"{summary_path(run_dir)}: field 'weak_solved_{checkpoint}' missing; train it "
                            f"(`sws train {checkpoint} --run {run_dir}`), then rerun `sws eval --run {run_dir}`")

    def overall(prefix: str, checkpoint: str) -> float | None:
        return summary.get(f"{prefix}_{checkpoint}", {}).get("overall")

    def gap(prefix: str) -> float | None:
        augmented, baseline = overall(prefix, "augmented"), overall(prefix, "baseline")
        return None if augmented is None or baseline is None else augmented - baseline

    return RunResult(
        run=Path(run_dir),
        seed=(load_config(run_config_path(run_dir), paths_relative_to_file=False).seed
              if run_config_path(run_dir).is_file() else None),
        solved={checkpoint: overall("weak_solved", checkpoint) for checkpoint in HEADLINE_CHECKPOINTS},
        gaps={prefix: gap(prefix) for prefix in GAPS},
    )


def spread(values: list[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation of the measured values; None where too few were measured."""
    measured = [value for value in values if value is not None]
    mean = statistics.fmean(measured) if measured else None
    return mean, statistics.stdev(measured) if len(measured) > 1 else None


def share(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def points(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:+.1f}"


def points_apart(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def comparison_table(results: list[RunResult]) -> Table:
    """One row per run (its shares and differences), then the mean and standard deviation of each column."""
    shown_gaps = [prefix for prefix in GAPS if any(result.gaps[prefix] is not None for result in results)]
    # (title, one value per run, how a value and the mean are shown, how the sd is shown)
    columns: list[tuple[str, list[float | None], Callable, Callable]] = [
        *((name, [result.solved[name] for result in results], share, share) for name in HEADLINE_CHECKPOINTS),
        *((GAPS[prefix], [result.gaps[prefix] for result in results], points, points_apart)
          for prefix in shown_gaps),
    ]
    table = Table(title=f"Previously weak problems solved, over {len(results)} runs",
                  caption="; ".join(CAPTIONS[prefix] for prefix in shown_gaps))
    table.add_column("run")
    table.add_column("seed", justify="right")
    for title, *_ in columns:
        table.add_column(title, justify="right")
    for index, result in enumerate(results):
        table.add_row(str(result.run), "–" if result.seed is None else str(result.seed),
                      *(shown(values[index]) for _, values, shown, _ in columns),
                      end_section=index == len(results) - 1)
    means, deviations = [], []
    for _, values, shown, shown_sd in columns:
        mean, deviation = spread(values)
        means.append(shown(mean))
        deviations.append(shown_sd(deviation))
    table.add_row("[bold]mean[/bold]", "", *means)
    table.add_row("[bold]sd[/bold]", "", *deviations)
    return table


def verdict(results: list[RunResult]) -> str:
    """In how many runs augmented solved more weak problems than the baseline, in points of the weak set."""
    gaps = [result.gaps["weak_solved"] for result in results]
    ahead = sum(gap > 0 for gap in gaps if gap is not None)
    mean, deviation = spread(gaps)
    if mean is None:
        return "no run measured augmented − baseline: none had weak problems"
    sd = "" if deviation is None else f", sd {points_apart(deviation)}"
    return f"augmented ahead of the baseline in {ahead} of {len(results)} runs; mean {points(mean)} points{sd}"
