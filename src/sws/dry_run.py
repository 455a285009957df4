"""`sws run PIPELINE --run DIR --dry-run`: every step `sws run` would take, in order, and whether it is up to date
or why it would run, writing nothing (not even the run directory). A pipeline's `not_run` line comes first; a
co-training pipeline's plan (`sws.cotrain.plan`) follows the steps.

Each step is driven as `sws run` drives it, inside `runner.planning()`: the runner checks every stage's manifest
as it does before running one (`manifests.stale_reason`, the one place that decides), records the current ones and
stops the step at the first that would run. A step after one that would run waits on it: its inputs are not made
yet, so it is not checked. Rounds after the first (`--rounds N`) are named, not checked.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

from sws import runner, ui
from sws.config import PipelineConfig
from sws.cotrain.plan import plan_table as cotraining_plan
from sws.pipeline import pipeline_steps, with_seed_input


@dataclass(frozen=True)
class PlannedStep:
    """One step of `sws run`: the stages found up to date, and why the step would run (None: it would not)."""

    name: str
    current: tuple[str, ...]
    would_run: str | None


def plan_run(cfg: PipelineConfig, run_dir: Path, force: bool = False) -> list[PlannedStep]:
    """What `sws run` would do in `run_dir` with `cfg`, step by step, without running or writing anything."""
    cfg = with_seed_input(cfg, run_dir)
    planned: list[PlannedStep] = []
    waits_on: str | None = None
    with _messages_silenced():
        for step in pipeline_steps(cfg):
            if waits_on is not None:
                planned.append(PlannedStep(step.name, (), f"waits on {waits_on}, which would run first"))
            elif step.would_run is not None:
                planned.append(PlannedStep(step.name, (), step.would_run(cfg)))
            else:
                planned.append(_checked(step.name, step.run, cfg, run_dir, force))
                if planned[-1].would_run is not None:
                    waits_on = step.name
    return planned


def _checked(name: str, run, cfg: PipelineConfig, run_dir: Path, force: bool) -> PlannedStep:
    with runner.planning() as current:
        try:
            run(cfg, run_dir, force)
        except runner.WouldRun as stopped:
            inner = f"{stopped.stage}: " if stopped.stage != name else ""
            return PlannedStep(name, tuple(current), f"{inner}{stopped.reason}")
    return PlannedStep(name, tuple(current), None)


@contextlib.contextmanager
def _messages_silenced():
    """The steps' own messages (`up to date, skipped`, the funnel tables of a skipped rerun) stay unprinted."""
    was_quiet = ui.console.quiet
    ui.console.quiet = True
    try:
        yield
    finally:
        ui.console.quiet = was_quiet


def plan_table(planned: list[PlannedStep], run_dir: Path) -> Table:
    table = Table(title=f"sws run --dry-run: {run_dir} (nothing was run or written)", title_justify="left")
    table.add_column("#", justify="right")
    table.add_column("step")
    table.add_column("status")
    for number, step in enumerate(planned, 1):
        status = "up to date" if step.would_run is None else f"would run: {step.would_run}"
        table.add_row(str(number), step.name, status)
    return table


def print_plan(cfg: PipelineConfig, run_dir: Path, force: bool = False) -> None:
    planned = plan_run(cfg, run_dir, force)
    console = Console(width=max(120, Console().width), highlight=False)
    if cfg.not_run:
        console.print(f"NOT RUN: {cfg.not_run}", soft_wrap=True)
    console.print(plan_table(planned, run_dir))
    if cfg.cotrain.arms:
        console.print(cotraining_plan(cfg))
    if cfg.rounds.n > 1:
        console.print(f"then rounds 2 to {cfg.rounds.n} in {run_dir / 'rounds'}/, each on the round before's "
                      "outputs (not checked by --dry-run)", soft_wrap=True)
