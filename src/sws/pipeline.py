"""`sws run PIPELINE.yaml`: every stage of the method in order, each skipped when its manifest is current.

The world's setup steps first (arith: bootstrap policy → seed set; the math world has none, its seed file is
`prepare.input`), then the declared stages (`sws.stage`): prepare → train initial → identify → synthesize →
filter → mix → export verl → train baseline and augmented (side by side on a CPU with two cores) → eval →
report; with `select.arm`, also select → mix selected after the filter and train selected after the other two.
A step the config does not ask for (`Stage.runs_when`) is left out. The run ends with the headline: the share of the previously weak problems each policy solves, per
category. With `rounds.n` > 1 (`--rounds N`) the same stages run again for each later round in `rounds/<r>/`,
on inputs wired from the round before (`sws.stages.rounds`), and the run keeps the weakness ledger.
"""

from __future__ import annotations

import functools
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from sws import answer, arms, preflight, runner, ui
from sws.config import PipelineConfig, save_run_config, with_overrides
from sws.errors import UserError
from sws.run_dir import RunDir, in_round
from sws.stage import Stage, get_stage, run_stages, synthesis_steps
from sws.stages import eval as eval_stage
from sws.stages import rounds
from sws.tables import read_table, table_path
from sws.world import PipelineStep, get_world


def with_seed_input(cfg: PipelineConfig, run_dir: Path) -> PipelineConfig:
    """Without an explicit `prepare.input`, prepare reads the seed set the world's setup steps draw (if any)."""
    seed_input = get_world(cfg.world).seed_input(run_dir)
    if seed_input is None or cfg.prepare.input is not None:
        return cfg
    return with_overrides(cfg, {"prepare.input": str(seed_input)})


def planned_stages(cfg: PipelineConfig) -> list[Stage]:
    """Every declared stage `sws run` runs that the config asks for, in order."""
    stages = [stage for stage in run_stages() if stage.is_on(cfg)]
    if cfg.cotrain.only:  # a co-training pipeline: the seed problems, the co-training arms, the report
        stages = [stage for stage in stages if stage.name in ("prepare", "report") or stage.section == "cotrain"]
    return stages


def pipeline_steps(cfg: PipelineConfig) -> list[PipelineStep]:
    """The world's setup steps, then the planned stages."""
    return [*get_world(cfg.world).setup_steps(), *(declared_step(stage) for stage in planned_stages(cfg))]


def declared_step(stage: Stage) -> PipelineStep:
    return PipelineStep(stage.title or stage.name, functools.partial(runner.run, stage))


def later_round_steps(cfg: PipelineConfig, number: int) -> list[PipelineStep]:
    """Round `number` > 1: its inputs from the round before, then the same stages as round 1 but those that write
    what was wired (`sws.stages.rounds`). The steps are given the round's folder."""
    wire = PipelineStep(f"round {number} inputs", functools.partial(runner.run, rounds.INPUTS))
    return [wire, *(declared_step(stage) for stage in rounds.later_round_stages()
                    if stage.is_on(cfg))]


def run_steps(cfg: PipelineConfig, run_dir: Path, steps: list[PipelineStep], force: bool, label: str = "") -> None:
    """Each step in order (skipped by its stage when its manifest is current); `config.yaml` after each success."""
    for number, step in enumerate(steps, 1):
        ui.info(f"[bold]── {label}{number}/{len(steps)} {step.name}[/bold]")
        step_started = time.perf_counter()
        step.run(cfg, Path(run_dir), force)
        save_run_config(run_dir, cfg)
        ui.info(f"{step.name}: {time.perf_counter() - step_started:.1f} s")


def run(cfg: PipelineConfig, run_dir: Path, force: bool = False, source: Path | str | None = None) -> None:
    """Run every step in order; a step whose manifest is current is skipped (all rerun with `force`).

    Every check that needs no model runs first; `config.yaml` is written after each step that succeeds. With
    `rounds.n` > 1, each later round runs in `rounds/<r>/` after the ledger of the rounds before is written, until
    `rounds.stop_when` ends the loop; the run's report is then written again with every round.
    """
    planned = planned_stages(cfg)
    synthesis = list(synthesis_steps()) if any(stage.name == "synthesize" for stage in planned) else []
    preflight.check(cfg, "run", source or "pipeline", planned + synthesis)
    cfg = with_seed_input(cfg, run_dir)
    started = time.perf_counter()
    n_rounds = cfg.rounds.n
    rebuild_damaged_ledger(cfg, run_dir)
    run_steps(cfg, run_dir, pipeline_steps(cfg), force, "round 1: " if n_rounds > 1 else "")
    if rounds.records_rounds(cfg):
        later = rounds.later_round_config(cfg)
        record_round(cfg, cfg, run_dir, 1, force)
        for number in range(2, n_rounds + 1):
            reason = rounds.stop_reason(cfg, read_table(run_dir, "rounds_summary"))
            if reason:
                ui.info(f"rounds: stopping before round {number}: {reason}")
                break
            round_dir = RunDir(run_dir).round(number).root
            run_steps(later, round_dir, later_round_steps(later, number), force, f"round {number}: ")
            record_round(cfg, later, run_dir, number, force)
        runner.run(get_stage("report"), cfg, run_dir, force)
    ui.info(f"pipeline finished in {time.perf_counter() - started:.0f} s")


def rebuild_damaged_ledger(cfg: PipelineConfig, run_dir: Path) -> None:
    """A damaged `ledger.parquet` or `rounds_summary.parquet` (derived data) written again from the tables of the
    rounds that have a weakness table, before a step reads it; one line when that is impossible, nothing written."""
    run = RunDir(run_dir)
    damaged = next((run.table(name) for name in rounds.LEDGER.writes
                    if run.table(name).exists() and not readable(run, name)), None)
    if damaged is None:
        return
    covered = 0
    while covered < cfg.rounds.n and run.table(in_round(covered + 1, "weakness")).exists():
        covered += 1
    try:
        runner.context(rounds.LEDGER, cfg, run_dir, rounds=covered)  # reads them all before anything is written
    except UserError as exc:
        raise UserError(f"{damaged}: damaged, and not rebuilt from the rounds' tables: {exc}") from None
    runner.run(rounds.LEDGER, cfg, run_dir, rounds=covered)
    ui.info(f"{damaged}: damaged; rebuilt from the tables of round{'s 1-' if covered > 1 else ' '}{covered}")


def readable(run: RunDir, name: str) -> bool:
    try:
        read_table(run.root, name)
    except UserError:
        return False
    return True


def record_round(cfg: PipelineConfig, round_cfg: PipelineConfig, run_dir: Path, number: int, force: bool) -> None:
    """After round `number` (run with `round_cfg`): the reference judge's ratings, then the ledger over the rounds
    so far."""
    if rounds.REFERENCE_RATING.is_on(round_cfg):
        runner.run(rounds.REFERENCE_RATING, round_cfg, RunDir(run_dir).round(number).root, force)
    runner.run(rounds.LEDGER, cfg, run_dir, force, rounds=number)


def headline_table(summary: dict[str, Any]) -> Table:
    """Per category and overall: the share of previously weak problems each policy solves greedily."""
    present = [each for each in arms.ARMS if f"weak_solved_{each.name}" in summary]
    table = Table(title=f"Diagnostics: the {summary.get('n_weak', 0)} previously weak (training) problems "
                        "solved greedily, in %")
    table.add_column("category")
    for each in present:
        table.add_column(answer.name_of(each), justify="right")
    names = {each.name for each in present}
    differences = [pair for pair in arms.against(arms.HEADLINE[1]) if set(pair) <= names]
    for ahead, behind in differences:
        table.add_column(answer.difference_name(ahead, behind), justify="right")
    categories = sorted({category for each in present
                         for category in summary[f"weak_solved_{each.name}"]["per_category"]})

    def share(name: str, category: str | None) -> float | None:
        solved = summary[f"weak_solved_{name}"]
        return solved["overall"] if category is None else solved["per_category"].get(category)

    last_category = categories[-1] if categories else None
    for category in [*categories, None]:
        values = [share(each.name, category) for each in present]
        cells = ["–" if value is None else f"{100 * value:.1f} %" for value in values]
        for ahead, behind in differences:
            better, worse = share(ahead, category), share(behind, category)
            cells.append("–" if better is None or worse is None else f"{100 * (better - worse):+.1f} pts")
        table.add_row(category or "[bold]overall[/bold]", *cells, end_section=category == last_category)
    return table


ANSWER_TITLE = f"The answer: {answer.MEASURE} on the held-out sets"


def answer_table(run_dir: Path) -> Table | None:
    """`sws.answer`'s table of the run (None before eval measured a held-out set)."""
    if not all(table_path(run_dir, name).exists() for name in ("eval/problems", eval_stage.SETS)):
        return None
    frame = answer.answer_table(read_table(run_dir, "eval/problems"),
                                answer.held_out_sets(read_table(run_dir, eval_stage.SETS)))
    if frame.is_empty():
        return None
    table = Table(title=ANSWER_TITLE)
    for position, column in enumerate(frame.columns):
        table.add_column(column, justify="left" if position == 0 else "right", no_wrap=position > 0)
    for row in frame.iter_rows():
        table.add_row(*row)
    return table


def print_headline(run_dir: Path, console: Console | None = None) -> None:
    headline = eval_stage.read_summary(run_dir)
    console = console or ui.stdout_console()
    found = answer_table(run_dir)
    if found is not None:
        console.print(found)
        console.print(answer.DEFINITION)
    console.print(headline_table(headline))
    for line in headline_lines(headline):
        console.print(line)
    console.print(f"report: {RunDir(run_dir).report}")


def headline_lines(summary: dict[str, Any]) -> list[str]:
    """Below the table: the weak problems over k samples, fresh problems of their families (greedy and over k
    samples), each with augmented − baseline and its paired standard error, in points."""
    errors = summary.get("standard_errors", {})
    lines = []
    # (set, summary prefix, standard_errors measure, title)
    for eval_set, prefix, measure, title in (
            (eval_stage.WEAK_SET, "weak_avg_k", "avg_k", "Weak problems, share of k samples right"),
            (eval_stage.WEAK_LIKE_SET, "weak_like_solved", "pass1",
             "Fresh problems of the weak problems' families (learned the skill, or only the problems?), greedy"),
            (eval_stage.WEAK_LIKE_SET, "weak_like_avg_k", "avg_k", "The same fresh problems, share of k samples right")):
        shares = {name: summary.get(f"{prefix}_{name}", {}).get("overall") for name in arms.NAMES}
        if all(share is None for share in shares.values()):
            continue
        line = f"{title}: " + ", ".join(f"{answer.name_of(arms.arm(name))} {100 * share:.1f} %"
                                        for name, share in shares.items() if share is not None)
        error = errors.get(eval_set, {}).get(eval_stage.DIFFERENCE, {}).get(measure)
        ahead, behind = (shares.get(name) for name in arms.HEADLINE)
        if ahead is not None and behind is not None and error is not None:
            line += (f" ({answer.difference_name(*arms.HEADLINE)} {100 * (ahead - behind):+.1f} ± "
                     f"{100 * error:.1f} pts, one standard error)")
        lines.append(line)
    return lines


def print_rounds(run_dir: Path, console: Console | None = None) -> None:
    """With `sws run --rounds N`: per round, weak problems by ledger status and the headline."""
    path = RunDir(run_dir).table("rounds_summary")
    if not path.exists():
        return
    per_round = read_table(run_dir, "rounds_summary")
    table = Table(title="Rounds (ledger.parquet: every problem weak in any round)")
    columns = [column for column in (
        "round", "n_weak", "n_new", "n_persisting", "n_resolved", "n_relapsed", "resolved_share", "n_kept",
        *(f"weak_solved_{arm.name}" for arm in arms.every_round() if arm.starts_from is not None))
        if column in per_round.columns]
    for column in columns:
        table.add_column(column.removeprefix("n_").replace("weak_solved_", "solved "), justify="right")
    for row in per_round.iter_rows(named=True):
        table.add_row(*("–" if row[column] is None else f"{row[column]:.1%}" if isinstance(row[column], float)
                        else str(row[column]) for column in columns))
    (console or ui.stdout_console()).print(table)
