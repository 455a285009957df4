"""The runner: the only code that touches the run directory for a declared stage (`sws.stage.Stage`).

`run_stage(stage, cfg, run_dir)` reads the tables the declaration names (schema-checked), fingerprints the settings
the declaration names and the inputs, and skips the stage when its manifest matches them and its outputs are the
files it wrote. Otherwise it hands the stage's compute function a `StageContext` (the config, the input tables, one
executor for the whole stage, the world) and writes what the function returns: the output tables, the rejected
rows beside each filtered table (`<table>.rejected.parquet`, each row with its `reject_reason`), the funnel row
and the manifest, committed as one set (`commit_stage`). A compute function never opens the run directory.

A declared read `<table>.rejected` is the rejected rows beside `<table>`; a stage may read another run folder's
tables (`Stage.reads_from`: a later round reads the round before's), and reads the run's manifests through its
context (`StageContext.manifest`, `manifests`). `context` builds a stage's context without running it (what
`sws train --dry-run` prepares from), and `is_current` says whether `run_stage` would skip it. Inside `planning()`
(`sws run --dry-run`) no stage runs: `commit_stage` records each current stage and raises `WouldRun` at the first
that is not, with the reason it would run.

Adaptive regeneration (`sws.stages.adapt`) runs the synthesis stages again in round r: their round tables
(`ROUND_TABLES`) and manifests then live under `adapt/round-<r>/`, and the same declarations serve.
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from sws import tokens, ui
from sws.atomic_files import (
    OutputSet,
    absolute,
    atomic_write,
    copy_file,
    interrupts_deferred,
    remove_leftover_temporaries,
    running_stages,
    write_json,
    write_parquet,
)
from sws.config import PipelineConfig
from sws.engines.base import Completion
from sws.engines.cache import tally as cache_tally
from sws.errors import UserError
from sws.executors import Executor, executor_for
from sws.fingerprints import config_hash, fingerprint
from sws.funnel import FunnelRow, funnel_row
from sws.manifests import (
    StageResult,
    current_manifest,
    fingerprints,
    float_environment,
    package_versions,
    read_manifest,
    remove_manifest,
    restore_if_untouched,
    skipped_result,
    stale_reason,
)
from sws.run_dir import RunDir
from sws.stage import Stage
from sws.tables import read_parquet, read_table, round_name, write_table
from sws.world import World, get_world

# The tables each adaptive round writes anew (the others, such as `problems`, are the run's).
ROUND_TABLES = frozenset({"concept_sets", "synthetic", "rated", "labeled", "audited", "scored"})
# A declared read `<table>.rejected` is the rejected rows beside `<table>`: any columns, with `reject_reason`.
REJECTED = ".rejected"
# The stages found current so far while planning (`planning()`); None: stages run.
_planned: ContextVar[list[str] | None] = ContextVar("planned", default=None)


class WouldRun(Exception):
    """Raised while planning at the first stage that would run, with why (`manifests.stale_reason`)."""

    def __init__(self, stage: str, reason: str) -> None:
        super().__init__(f"{stage}: {reason}")
        self.stage, self.reason = stage, reason


@contextlib.contextmanager
def planning() -> Iterator[list[str]]:
    """Within it, stages are checked, not run: the list fills with the current stages' names, in order, and the
    first stage that would run raises `WouldRun`. Nothing is written."""
    planned: list[str] = []
    token = _planned.set(planned)
    try:
        yield planned
    finally:
        _planned.reset(token)


def is_planning() -> bool:
    return _planned.get() is not None


def scoped(name: str, adapt_round: int) -> str:
    """Table `name` as adaptive round `adapt_round` holds it."""
    return round_name(name, adapt_round) if name.removesuffix(REJECTED) in ROUND_TABLES else name


@dataclass
class StageContext:
    """What a compute function gets: the config, its input tables by declared name, an executor, the world."""

    cfg: PipelineConfig
    tables: dict[str, pl.DataFrame]
    run: RunDir
    adapt_round: int = 0
    force: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    # What decides the outputs: the declared settings and the input files (`identity`).
    settings: dict[str, Any] = field(default_factory=dict)
    inputs: list[Path] = field(default_factory=list)
    # The run folder the tables were read from (`Stage.reads_from`); None: `run`.
    reads_from: RunDir | None = None

    @functools.cached_property
    def executor(self) -> Executor:
        return executor_for(self.cfg, self.run.root)

    @property
    def world(self) -> World:
        return get_world(self.cfg.world)

    @functools.cached_property
    def identity(self) -> str:
        """A hash of everything that decides the stage's outputs: its settings and its inputs' contents."""
        return config_hash({"config": self.settings, "inputs": [fingerprint(path) for path in self.inputs]})

    def table(self, name: str) -> pl.DataFrame:
        return self.tables[name]

    def source(self, name: str) -> Path:
        """Where input table `name` lies, for a message that names the file."""
        return (self.reads_from or self.run).table(scoped(name, self.adapt_round))

    def manifest(self, stage: str) -> dict[str, Any] | None:
        """The manifest stage `stage` of this run wrote (None: not run, or not current)."""
        return read_manifest(self.run.root, stage)

    def manifests(self) -> list[dict[str, Any]]:
        """Every stage manifest of the run (adaptive rounds' aside), the first finished first."""
        paths = sorted(self.run.manifests.glob("*.json"), key=lambda path: path.stat().st_mtime)
        return [manifest for manifest in map(self.manifest, (path.stem for path in paths)) if manifest is not None]


@dataclass
class StageOutput:
    """What a compute function returns: tables by declared name, the rejected rows of filtered ones, info for the
    manifest, and (for the funnel) the rows it took in and the completions it asked for."""

    tables: dict[str, pl.DataFrame] = field(default_factory=dict)
    rejected: dict[str, pl.DataFrame] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    rows_in: int | None = None
    completions: Iterable[Completion] = ()
    # Files outside the table layout (a report, an export): path -> writer of a temporary path.
    files: dict[Path, Callable[[Path], None]] = field(default_factory=dict)
    # The funnel row of a stage that declares `funnel`. True: the runner's (rows in, the first write's rows, the
    # reasons of its rejected rows, `completions`). A row: the stage's own, where the runner's is not its row
    # (mix counts only the rows it adds). False: none this time (prepare's is its categorizer's, when it labels).
    funnel: FunnelRow | bool = True


def reads_of(stage: Stage, cfg: PipelineConfig, adapt_round: int) -> dict[str, str]:
    """Declared name -> table name in the run, of every table the stage reads."""
    names = {name: scoped(name, adapt_round) for name in (*stage.reads, *stage.optional_reads)}
    for more in (stage.more_reads, stage.more_optional_reads):
        if more is not None:
            names |= {name: name for name in more(cfg, adapt_round)}
    return names


def writes_of(stage: Stage, adapt_round: int) -> dict[str, str]:
    return {name: scoped(name, adapt_round) for name in stage.writes}


@dataclass(frozen=True)
class Plan:
    """One run of a declared stage: its manifest's name, the tables it reads (those present, from `source`) and
    writes, the files that decide it and those it writes, and its settings."""

    name: str
    source: RunDir
    reads: dict[str, str]
    writes: dict[str, str]
    inputs: list[Path]
    outputs: list[Path]
    settings: dict[str, Any]


def plan(stage: Stage, cfg: PipelineConfig, run: RunDir, adapt_round: int, options: dict[str, Any]) -> Plan:
    source = stage.reads_from(run) if stage.reads_from is not None else run
    optional = set(stage.optional_reads) | set(
        stage.more_optional_reads(cfg, adapt_round) if stage.more_optional_reads is not None else ())
    present = {declared: table for declared, table in reads_of(stage, cfg, adapt_round).items()
               if declared not in optional or source.table(table).exists()}
    writes = writes_of(stage, adapt_round)
    files = stage.output_files(cfg, run, options) if stage.output_files is not None else []
    inputs = [source.table(table) for table in present.values()]
    inputs += stage.input_files(cfg, run) if stage.input_files is not None else []
    outputs = [*(run.table(table) for table in writes.values()),
               *(run.rejected(writes[table]) for table in stage.rejects), *files]
    settings = stage.settings(cfg, options) if stage.settings is not None else {}
    if stage.float_results:
        settings = {**settings, "float_environment": float_environment()}
    return Plan(round_name(stage.name, adapt_round), source, present, writes, inputs, outputs, settings)


def read_input(source: RunDir, table: str) -> pl.DataFrame:
    """Input table `table` of a stage, schema-checked; rejected rows (`<table>.rejected`) need a reject_reason."""
    if not table.endswith(REJECTED):
        return read_table(source.root, table)
    rejected = read_parquet(source.table(table))
    if "reject_reason" not in rejected.columns:
        raise UserError(f"{source.table(table)}: missing column 'reject_reason' (rejected rows name why); "
                        "rerun the stage that wrote it")
    return rejected


def context(stage: Stage, cfg: PipelineConfig, run_dir: Path | str, adapt_round: int = 0, force: bool = False,
            **options: Any) -> StageContext:
    """What the stage's compute function would get, without running it (`sws train --dry-run`)."""
    return _context(stage, plan(stage, cfg, RunDir(run_dir), adapt_round, options), cfg, RunDir(run_dir),
                    adapt_round, force, options)


def _context(stage: Stage, planned: Plan, cfg: PipelineConfig, run: RunDir, adapt_round: int, force: bool,
             options: dict[str, Any]) -> StageContext:
    tables = {declared: read_input(planned.source, table) for declared, table in planned.reads.items()}
    return StageContext(cfg, tables, run, adapt_round, force, options, planned.settings, planned.inputs,
                        planned.source if stage.reads_from is not None else None)


def is_current(stage: Stage, cfg: PipelineConfig, run_dir: Path | str, adapt_round: int = 0, **options: Any) -> bool:
    """Whether the stage's manifest matches its settings, inputs and outputs: `run_stage` would skip it."""
    planned = plan(stage, cfg, RunDir(run_dir), adapt_round, options)
    return current_manifest(Path(run_dir), planned.name, planned.settings, planned.inputs, planned.outputs) is not None


def run_stage(stage: Stage, cfg: PipelineConfig, run_dir: Path | str, force: bool = False, adapt_round: int = 0,
              **options: Any) -> StageResult:
    """Run declared `stage` unless its manifest is current; see the module docstring."""
    run = RunDir(run_dir)
    planned = plan(stage, cfg, run, adapt_round, options)

    def body() -> StageResult:
        context = _context(stage, planned, cfg, run, adapt_round, force, options)
        if stage.compute is None:
            raise RuntimeError(f"stage {stage.name} has no compute function; run it with `runner.run`")
        output = stage.compute(context)
        return _write_output(stage, run, planned.writes, planned.reads, context.tables, output)

    return commit_stage(run.root, planned.name, config=planned.settings, inputs=planned.inputs,
                        outputs=planned.outputs, body=body, force=force)


def _write_output(stage: Stage, run: RunDir, writes: dict[str, str], reads: dict[str, str],
                  tables: dict[str, pl.DataFrame], output: StageOutput) -> StageResult:
    if set(output.tables) != set(writes) or set(output.rejected) != set(stage.rejects):
        raise RuntimeError(f"stage {stage.name} returned tables {sorted(output.tables)} and rejected "
                           f"{sorted(output.rejected)}; it declares {sorted(writes)} and {sorted(stage.rejects)}")
    rows: dict[str, int] = {}
    for declared, table in writes.items():
        write_table(run.root, table, output.tables[declared])
        rows[table] = output.tables[declared].height
    for declared, rejected in output.rejected.items():
        if "reject_reason" not in rejected.columns:
            raise RuntimeError(f"stage {stage.name}: rejected rows of '{declared}' have no reject_reason")
        write_parquet(rejected, run.rejected(writes[declared]))
        rows[f"{writes[declared]}.rejected"] = rejected.height
    for path, write in output.files.items():
        atomic_write(path, write)
    info = dict(output.info)
    if stage.funnel and output.funnel:
        info["funnel"] = (output.funnel if isinstance(output.funnel, FunnelRow)
                          else _funnel(stage, reads, tables, output)).as_info()
    return StageResult(stage.name, rows=rows, info=info)


def _funnel(stage: Stage, reads: dict[str, str], tables: dict[str, pl.DataFrame], output: StageOutput) -> FunnelRow:
    """The runner's funnel row: rows in (`rows_in`, else the first read's), the first write's rows, the reasons of
    its rejected rows, and the cut-off ones among `completions`."""
    kept = stage.writes[0]
    rows_in = output.rows_in if output.rows_in is not None else tables[next(iter(reads))].height
    return funnel_row(stage.name, rows_in, output.tables[kept].height,
                      output.rejected[kept]["reject_reason"].to_list(), output.completions)


def commit_stage(run_dir: Path, stage: str, *, config: Any, inputs: list[Path], outputs: list[Path],
                 body: Callable[[], StageResult], force: bool = False) -> StageResult:
    """Run `body` unless the stage's manifest matches its config, its inputs and its outputs' fingerprints.

    The outputs are committed as a set: the manifest is removed before the body runs, the body's writes to
    declared output files are staged, and only after it returns are they renamed into place and the manifest
    written, each with fsync. A kill at any instant leaves the old outputs or the new ones, and a manifest
    only beside the set it describes. (Folder outputs, such as a model, are written in place by their
    producer; the missing manifest marks them unfinished until the stage completes.)
    """
    run_dir = Path(run_dir)
    layout = RunDir(run_dir)
    for path in [*outputs, layout.manifest(stage)]:  # before anything is removed or written
        layout.check_inside(Path(path))
    wanted_hash = config_hash(config)
    inputs_fp = fingerprints(run_dir, inputs)
    previous = read_manifest(run_dir, stage)
    reason = stale_reason(previous, wanted_hash, inputs_fp, fingerprints(run_dir, outputs))
    planned = _planned.get()
    if planned is not None:
        if reason is not None or force:
            raise WouldRun(stage, reason or "--force reruns it")
        planned.append(stage)
    if reason is None and not force:
        ui.info(f"{stage}: up to date, skipped ({layout.manifest(stage)} matches; --force reruns it)")
        return skipped_result(stage, previous)
    if reason is not None and reason.startswith("output"):
        ui.info(f"{stage}: {reason}; running it again")
    if previous is None and (read_manifest(run_dir, stage, partial=True) or {}).get("partial"):
        ui.info(f"{stage}: stopped at a spending cap before; continuing from its finished shards")
    remove_manifest(run_dir, stage)
    remove_leftover_temporaries(outputs)
    started = time.perf_counter()
    declared = OutputSet({absolute(p) for p in outputs if not Path(p).is_dir()})
    running_stages.append(declared)
    try:
        with tokens.ledger() as used_tokens, cache_tally() as cache_use:
            result = body()
    except tokens.CapReached as stop:
        with interrupts_deferred():
            declared.discard()
            write_json(layout.manifest(stage), {
                "stage": stage, "partial": True, "config_hash": wanted_hash, "inputs": inputs_fp, "outputs": {},
                "rows": {}, "info": {"stopped_at": stop.setting}, "seconds": round(time.perf_counter() - started, 3),
                **({"tokens": used_tokens} if used_tokens else {}), "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
            })
        raise
    except BaseException:
        with interrupts_deferred():
            declared.discard()
            restore_if_untouched(run_dir, stage, previous, outputs)
        raise
    finally:
        running_stages.pop()
    with interrupts_deferred():
        declared.commit()
    hits, misses = cache_use
    if hits + misses:
        ui.info(f"{stage}: request cache {hits} hits, {misses} misses ({hits / (hits + misses):.0%} reused)")
    missing = [str(p) for p in outputs if not Path(p).exists()]
    if missing:
        raise RuntimeError(f"stage {stage} finished without writing its outputs {missing}")
    result.seconds, result.tokens = round(time.perf_counter() - started, 3), used_tokens
    write_json(layout.manifest(stage), {
        "stage": stage, "config_hash": wanted_hash, "inputs": inputs_fp, "outputs": fingerprints(run_dir, outputs),
        "rows": result.rows, "info": result.info, "seconds": result.seconds,
        **({"tokens": used_tokens} if used_tokens else {}),
        "versions": package_versions(), "finished_at": time.strftime("%Y-%m-%dT%H:%M:%S"),
    })
    return result


def copy_tables(source: Path | str, target: Path | str, names: Iterable[str]) -> None:
    """Copies of run `source`'s tables `names` in run `target` (a scratch run); a copy that is already the same
    is left alone, so the stages that read it stay current, and a table `source` lacks is not copied."""
    for name in names:
        original, copy = RunDir(source).table(name), RunDir(target).table(name)
        if original.exists() and (not copy.exists() or fingerprint(copy) != fingerprint(original)):
            copy_file(original, copy)


def run(stage: Stage, cfg: PipelineConfig, run_dir: Path | str, force: bool = False, **options: Any) -> Any:
    """Run a declared stage: its own `drive`, or `run_stage` on its compute function."""
    if stage.drive is not None:
        return stage.drive(cfg, Path(run_dir), force, **options)
    return run_stage(stage, cfg, run_dir, force, **options)
