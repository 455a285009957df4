"""`sws compare RUN...`: augmented − baseline across runs of one pipeline (seeds), with their mean and spread.

One run measures its difference on a few hundred weak problems, so a single seed's gain is mostly noise; the
paper's claim is about what holds over seeds. Each run contributes the overall shares from its `summary.json`
(written by `sws eval`): on the weak problems, and in the arith world on fresh problems of their families
(`weak_like`). For each difference the table gives the mean over runs, the sample standard deviation and the
standard error of the mean (SEM = sd / √n), and says whether the mean exceeds two SEM.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table

from sws.config import load_config
from sws.errors import UserError
from sws.run_dir import RunDir
from sws.stages.eval import HEADLINE_CHECKPOINTS, read_summary

# summary.json prefix -> column title of its augmented − baseline
GAPS = {"weak_solved": "aug − base", "weak_like_solved": "aug − base, fresh"}
CAPTIONS = {"weak_solved": "aug − base: augmented − baseline, in points",
            "weak_like_solved": "fresh: on fresh problems of the weak problems' families"}
GAP_NAMES = {"weak_solved": "weak problems", "weak_like_solved": "fresh problems of their families (weak_like)"}


@dataclass(frozen=True)
class RunResult:
    run: Path
    seed: int | None  # from the run's config.yaml
    solved: dict[str, float | None]  # checkpoint -> overall share of weak problems solved
    gaps: dict[str, float | None]  # GAPS prefix -> augmented − baseline, overall; None when not measured
    machine: tuple[tuple[str, str], ...]  # what its numbers depend on besides config and seed (MACHINE_FIELDS)


# Packages whose kernels decide a run's numbers, besides the CPU kernels themselves.
NUMERIC_PACKAGES = ("torch", "transformers", "trl")


def machine_of(summary: dict) -> tuple[tuple[str, str], ...]:
    """The CPU kernels and numeric package versions a run was evaluated with (as `sws eval` recorded them)."""
    recorded = summary.get("environment", {})
    versions = recorded.get("versions", {})
    return (("CPU kernels", str(recorded.get("cpu_kernels"))),
            *((package, str(versions.get(package))) for package in NUMERIC_PACKAGES))


def run_results(runs: list[Path]) -> list[RunResult]:
    """`run_result` of each run; a run given twice (under any spelling of its path) is a UserError, since it
    would count as two seeds and shrink the standard error."""
    seen: dict[Path, Path] = {}
    for run in map(Path, runs):
        if run.resolve() in seen:
            raise UserError(f"{run}: given twice (also as {seen[run.resolve()]}); list each run once")
        seen[run.resolve()] = run
    return [run_result(run) for run in runs]


def run_result(run_dir: Path) -> RunResult:
    """The overall shares and differences of one evaluated run; a UserError names what is missing."""
    summary = read_summary(run_dir)
    for checkpoint in ("baseline", "augmented"):
        if f"weak_solved_{checkpoint}" not in summary:
            raise UserError(f"{RunDir(run_dir).summary}: field 'weak_solved_{checkpoint}' missing; train it "
                            f"(`sws train {checkpoint} --run {run_dir}`), then rerun `sws eval --run {run_dir}`")

    def overall(prefix: str, checkpoint: str) -> float | None:
        return summary.get(f"{prefix}_{checkpoint}", {}).get("overall")

    def gap(prefix: str) -> float | None:
        augmented, baseline = overall(prefix, "augmented"), overall(prefix, "baseline")
        return None if augmented is None or baseline is None else augmented - baseline

    return RunResult(
        run=Path(run_dir),
        seed=(load_config(RunDir(run_dir).config, paths_relative_to_file=False).seed
              if RunDir(run_dir).config.is_file() else None),
        solved={checkpoint: overall("weak_solved", checkpoint) for checkpoint in HEADLINE_CHECKPOINTS},
        gaps={prefix: gap(prefix) for prefix in GAPS},
        machine=machine_of(summary),
    )


@dataclass(frozen=True)
class Spread:
    """Mean, sample standard deviation and standard error of the mean of the measured values (None where too
    few were measured: no mean without a value, no sd or SEM with fewer than two)."""

    n: int
    mean: float | None
    sd: float | None

    @property
    def sem(self) -> float | None:
        return None if self.sd is None else self.sd / math.sqrt(self.n)

    @property
    def above_two_sem(self) -> bool | None:
        """Whether the mean exceeds two standard errors (None without an SEM)."""
        return None if self.mean is None or self.sem is None else self.mean > 2 * self.sem


def spread(values: list[float | None]) -> Spread:
    measured = [value for value in values if value is not None]
    return Spread(len(measured), statistics.fmean(measured) if measured else None,
                  statistics.stdev(measured) if len(measured) > 1 else None)


def share(value: float | None) -> str:
    return "–" if value is None else f"{value:.1%}"


def points(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:+.1f}"


def points_apart(value: float | None) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def yes_no(value: bool | None) -> str:
    return "–" if value is None else ("yes" if value else "no")


def comparison_table(results: list[RunResult]) -> Table:
    """One row per run (its shares and differences), then each column's mean, standard deviation and SEM, and
    for the differences whether the mean exceeds two SEM."""
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
    spreads = [(spread(values), shown, shown_sd) for _, values, shown, shown_sd in columns]
    table.add_row("[bold]mean[/bold]", "", *(shown(found.mean) for found, shown, _ in spreads))
    table.add_row("[bold]sd[/bold]", "", *(shown_sd(found.sd) for found, _, shown_sd in spreads))
    table.add_row("[bold]sem[/bold]", "", *(shown_sd(found.sem) for found, _, shown_sd in spreads))
    table.add_row("[bold]mean > 2 sem[/bold]", "", *("" for _ in HEADLINE_CHECKPOINTS),
                  *(yes_no(found.above_two_sem) for found, _, _ in spreads[len(HEADLINE_CHECKPOINTS):]))
    return table


def verdict(results: list[RunResult]) -> str:
    """Per difference measured: in how many runs augmented was ahead, the mean, sd and SEM in points, and
    whether the mean exceeds two SEM."""
    lines = []
    for prefix, name in GAP_NAMES.items():
        gaps = [result.gaps[prefix] for result in results]
        found = spread(gaps)
        if found.mean is None:
            if prefix == "weak_solved":
                lines.append("no run measured augmented − baseline: none had weak problems")
            continue
        ahead = sum(gap > 0 for gap in gaps if gap is not None)
        line = f"{name}: augmented ahead of the baseline in {ahead} of {found.n} runs; mean {points(found.mean)} points"
        if found.sem is not None:
            beyond = "above" if found.above_two_sem else "not above"
            line += f", sd {points_apart(found.sd)}, SEM {points_apart(found.sem)}: {beyond} 2 SEM"
        lines.append(line)
    return "\n".join(lines)


def machine_note(results: list[RunResult]) -> str | None:
    """A warning when the runs did not all run on the same kernels and package versions, else None."""
    if len({result.machine for result in results}) <= 1:
        return None
    differing = [name for index, (name, _) in enumerate(results[0].machine)
                 if len({result.machine[index][1] for result in results}) > 1]
    return (f"note: the runs differ in {', '.join(differing)}, so seeds are not the only difference between them "
            "(see each summary.json's environment)")
