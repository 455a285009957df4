"""`sws compare RUN...`: augmented − baseline across runs of one pipeline (seeds), with their mean and spread, and
every other difference `sws.arms` declares where the runs trained both arms (selected − baseline, augmented −
selected, and the controls: augmented − untargeted, selected − random_selected, each control − baseline); then
where the gain sits (each difference on `weak_like` by category and family) and how often each arm drew the weak
problems (`sws.gain_by_family`).

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

from sws import arms, gain_by_family
from sws.config import load_config
from sws.errors import UserError
from sws.experiment_check import check_seeds_of_one_experiment
from sws.run_dir import RunDir
from sws.stages.eval import read_summary

# summary.json prefix -> what it measures: the weak problems and (arith) fresh problems of their families, each by
# the greedy answer and by the share of k samples right.
GAP_NAMES = {"weak_solved": "weak problems", "weak_avg_k": "weak problems, Avg@k",
             "weak_like_solved": "fresh problems of their families (weak_like)",
             "weak_like_avg_k": "fresh problems of their families (weak_like), Avg@k"}
TABLE_TITLES = {"weak_solved": "Previously weak problems solved (greedy)",
                "weak_avg_k": "Previously weak problems: share of k samples right (Avg@k)",
                "weak_like_solved": "Fresh problems of the weak problems' families solved (weak_like, greedy)",
                "weak_like_avg_k": "Fresh problems of the weak problems' families (weak_like, Avg@k)"}
# How the table and the verdict name each arm (`sws.arms`).
SHORT = {arm.name: arm.short for arm in arms.ARMS}
CALLED = {arm.name: arm.called or arm.name for arm in arms.ARMS}
CAPTIONS = {arm.name: arm.caption for arm in arms.ARMS if arm.caption}


@dataclass(frozen=True)
class Gap:
    """`ahead` − `behind` on the summary's `prefix` shares."""

    ahead: str
    behind: str
    prefix: str

    @property
    def title(self) -> str:
        return f"{SHORT[self.ahead]} − {SHORT[self.behind]}"


# The arms compared, ahead − behind (`sws.arms.differences`): synthesis against the same-steps baseline, and,
# where a run trained the selected arm (select.arm), selection against the baseline and synthesis against selection.
GAPS = tuple(Gap(ahead, behind, prefix) for ahead, behind in arms.differences() for prefix in GAP_NAMES)


@dataclass(frozen=True)
class RunResult:
    run: Path
    seed: int | None  # from the run's config.yaml
    solved: dict[str, dict[str, float | None]]  # GAP_NAMES prefix -> checkpoint its summary has -> overall share
    gaps: dict[Gap, float | None]  # overall difference; None when not measured
    machine: tuple[tuple[str, str], ...]  # what its numbers depend on besides config and seed (MACHINE_FIELDS)
    cpu: str  # the CPU it was evaluated on, as summary.json's environment names it


# Packages whose kernels decide a run's numbers, besides the CPU kernels themselves.
NUMERIC_PACKAGES = ("torch", "transformers", "trl")


def machine_of(summary: dict) -> tuple[tuple[str, str], ...]:
    """The CPU kernels and numeric package versions a run was evaluated with (as `sws eval` recorded them)."""
    recorded = summary.get("environment", {})
    versions = recorded.get("versions", {})
    return (("CPU kernels", str(recorded.get("cpu_kernels"))),
            *((package, str(versions.get(package))) for package in NUMERIC_PACKAGES))


def run_results(runs: list[Path]) -> list[RunResult]:
    """`run_result` of each run; a run given twice (under any spelling of its path), or runs that are not seeds of
    one experiment (`sws.experiment_check`), are a UserError: they would count as seeds of one measurement."""
    seen: dict[Path, Path] = {}
    for run in map(Path, runs):
        if run.resolve() in seen:
            raise UserError(f"{run}: given twice (also as {seen[run.resolve()]}); list each run once")
        seen[run.resolve()] = run
    check_seeds_of_one_experiment(list(map(Path, runs)))
    return [run_result(run) for run in runs]


def run_result(run_dir: Path) -> RunResult:
    """The overall shares and differences of one evaluated run; a UserError names what is missing."""
    summary = read_summary(run_dir)
    for checkpoint in reversed(arms.HEADLINE):
        if f"weak_solved_{checkpoint}" not in summary:
            raise UserError(f"{RunDir(run_dir).summary}: field 'weak_solved_{checkpoint}' missing; train it "
                            f"(`sws train {checkpoint} --run {run_dir}`), then rerun `sws eval --run {run_dir}`")

    def overall(prefix: str, checkpoint: str) -> float | None:
        return summary.get(f"{prefix}_{checkpoint}", {}).get("overall")

    def gap(difference: Gap) -> float | None:
        ahead, behind = overall(difference.prefix, difference.ahead), overall(difference.prefix, difference.behind)
        return None if ahead is None or behind is None else ahead - behind

    return RunResult(
        run=Path(run_dir),
        seed=(load_config(RunDir(run_dir).config, paths_relative_to_file=False).seed
              if RunDir(run_dir).config.is_file() else None),
        solved={prefix: {checkpoint: overall(prefix, checkpoint) for checkpoint in arms.NAMES
                         if f"{prefix}_{checkpoint}" in summary} for prefix in GAP_NAMES},
        gaps={difference: gap(difference) for difference in GAPS},
        machine=machine_of(summary),
        cpu=str(summary.get("environment", {}).get("cpu") or "unknown CPU"),
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

    @property
    def below_two_sem(self) -> bool | None:
        """Whether the mean lies more than two standard errors below zero: the other way round from the claim."""
        return None if self.mean is None or self.sem is None else self.mean < -2 * self.sem


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


def beyond_two_sem(found: Spread) -> str:
    """`yes` when the mean clears two SEM, `reversed` when it lies two SEM below zero, else `no`."""
    if found.above_two_sem is None:
        return "–"
    return "yes" if found.above_two_sem else "reversed" if found.below_two_sem else "no"


def measured(results: list[RunResult]) -> list[str]:
    """The GAP_NAMES measures some run's summary has."""
    return [prefix for prefix in GAP_NAMES if any(result.solved[prefix] for result in results)]


def comparison_table(results: list[RunResult], measure: str = "weak_solved") -> Table:
    """For one measure (a GAP_NAMES prefix): one row per run (its shares and differences), then each column's
    mean, standard deviation and SEM, and for the differences whether the mean exceeds two SEM. A checkpoint no
    run evaluated, and a difference no run measured, are left out (the selected arm, in runs without
    select.arm)."""
    shown_arms = [name for name in arms.NAMES if any(name in result.solved[measure] for result in results)]
    shown_gaps = [gap for gap in GAPS
                  if gap.prefix == measure and any(result.gaps[gap] is not None for result in results)]
    # (title, one value per run, how a value and the mean are shown, how the sd is shown)
    columns: list[tuple[str, list[float | None], Callable, Callable]] = [
        *((name, [result.solved[measure].get(name) for result in results], share, share) for name in shown_arms),
        *((gap.title, [result.gaps[gap] for result in results], points, points_apart) for gap in shown_gaps),
    ]
    captions = [caption for key, caption in CAPTIONS.items() if any(key == gap.ahead for gap in shown_gaps)]
    table = Table(title=f"{TABLE_TITLES[measure]}, over {len(results)} runs", caption="; ".join(captions))
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
    table.add_row("[bold]mean > 2 sem[/bold]", "", *("" for _ in shown_arms),
                  *(beyond_two_sem(found) for found, _, _ in spreads[len(shown_arms):]))
    return table


def verdict(results: list[RunResult]) -> str:
    """Per difference measured: in how many runs the one arm was ahead of the other, the mean, sd and SEM in
    points, and whether the mean exceeds two SEM."""
    lines = []
    for gap in GAPS:
        gaps = [result.gaps[gap] for result in results]
        found = spread(gaps)
        if found.mean is None:
            if gap == GAPS[0]:
                lines.append(f"no run measured {gap.ahead} − {gap.behind}: none had weak problems")
            continue
        ahead = sum(value > 0 for value in gaps if value is not None)
        line = (f"{GAP_NAMES[gap.prefix]}: {gap.ahead} ahead of {CALLED[gap.behind]} in {ahead} of {found.n} "
                f"runs; mean {points(found.mean)} points")
        if found.sem is not None:
            beyond = ("above 2 SEM" if found.above_two_sem else "below −2 SEM: reversed" if found.below_two_sem
                      else "not above 2 SEM")
            line += f", sd {points_apart(found.sd)}, SEM {points_apart(found.sem)}: {beyond}"
        lines.append(line)
    return "\n".join([*lines, *efficiency(results)])


def efficiency(results: list[RunResult], prefix: str = "weak_like_avg_k") -> list[str]:
    """The share of the family oracle's mean gain over the baseline that synthesis recovers (means over runs)."""
    gained, ceiling = (spread([result.gaps[Gap(ahead, "baseline", prefix)] for result in results]).mean
                       for ahead in ("augmented", "oracle_family"))
    if gained is None or ceiling is None:
        return []
    share_of = f"{100 * gained / ceiling:.0f} %" if ceiling > 0 else "nothing: the family oracle gained nothing"
    return [f"{GAP_NAMES[prefix]}: synthesis recovers {share_of} of the family oracle's gain over the baseline "
            f"(mean {points(gained)} against {points(ceiling)} points)"]


def where_the_gain_sits(runs: list[Path]) -> list[Table]:
    """Each difference on weak_like per category and family, as the mean over runs with its SEM, and how often
    each arm's training drew the weak problems (`sws.gain_by_family`)."""
    per_run = [gain_by_family.run_breakdown(run) for run in runs]
    if not any(found.height or draws.height for found, draws in per_run):
        return []
    effects = gain_by_family.mean_effects([found for found, _ in per_run])
    gains = Table(title=f"Where the gain sits: weak_like Avg@k by category and family, over {len(runs)} runs")
    for column in ("kind", "group", "difference", "runs", "problems", "mean (points)", "sem"):
        gains.add_column(column, justify="left" if column in ("kind", "group", "difference") else "right")
    for row in effects.iter_rows(named=True):
        gains.add_row(row["kind"], row["group"], f"{SHORT[row['ahead']]} − {SHORT[row['behind']]}",
                      str(row["runs"]), str(row["n"]), f"{row['points']:+.1f}",
                      "–" if row["sem"] is None else f"{row['sem']:.1f}")
    draws = gain_by_family.mean_draws([found for _, found in per_run])
    exposure = Table(title="How often each arm's training drew the weak problems (mean over runs)")
    for column in draws.columns:
        exposure.add_column(column, justify="left" if column == "arm" else "right")
    for row in draws.iter_rows():
        exposure.add_row(row[0], *(f"{value:.2f}" if isinstance(value, float) else str(value) for value in row[1:]))
    return [gains, exposure]


def machine_line(results: list[RunResult]) -> str:
    """Where the runs were evaluated: the CPU and its kernels, as each summary.json records them."""
    machines = sorted({f"{result.cpu}, CPU kernels {dict(result.machine)['CPU kernels']}" for result in results})
    return "measured on: " + "; ".join(machines)


def machine_note(results: list[RunResult]) -> str | None:
    """A warning when the runs did not all run on the same kernels and package versions, else None."""
    if len({result.machine for result in results}) <= 1:
        return None
    differing = [name for index, (name, _) in enumerate(results[0].machine)
                 if len({result.machine[index][1] for result in results}) > 1]
    return (f"note: the runs differ in {', '.join(differing)}, so seeds are not the only difference between them "
            "(see each summary.json's environment)")
