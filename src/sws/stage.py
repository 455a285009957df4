"""Stages: one declaration each, read by the runner, the CLI, `sws run`, preflight, read errors and the report.

A stage module (`sws/stages/<name>.py`) declares `DECLARED = (Stage(...),)`: the stage's name (also its
module's and its manifest's), the tables it reads and writes, the settings that decide its outputs, the teacher
roles it calls, the config section and the command-line options that set that section's fields, and its compute
function: a `StageContext` (input tables, config, executor) in, a `StageOutput` (tables, rejected rows, info) out.
`sws.runner.run_stage` does everything else (reading, fingerprints, skipping, writing, manifests). A stage that
runs other stages (synthesize, the training runs side by side) has a `drive` function instead of a compute one.

`STAGE_MODULES` lists the modules in the method's order, by name, so this module imports none of them; an
entry `module:GROUP` takes that module's declarations `GROUP` instead of `DECLARED`. `sws run` runs the
stages with `in_run` in this order. Adding a stage is its module with its declaration and one entry here; a
stage without a command of its own gets `sws <name-with-hyphens> --run DIR [options]` made from its declaration.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

STAGE_MODULES = (
    "prepare", "ingest", "train:DECLARED_INITIAL", "identify", "extract", "combine", "generate", "rate", "label",
    "audit", "synthesize", "score", "filter", "untargeted", "select", "select_random", "mix", "oracle_family", "export", "train:DECLARED_CONTINUATIONS", "cotrain", "eval", "report",
    "rounds",
)


@dataclass(frozen=True)
class Option:
    """A command-line option that sets config field `field` (dotted, e.g. `identify.max_acc`)."""

    field: str
    help: str
    type: type = str
    # The option's spelling when it is not `--<last part of field>`; two spellings for a bool: "--strict/--inclusive".
    flag: str | None = None

    @property
    def flags(self) -> str:
        return self.flag or "--" + self.field.rsplit(".", 1)[-1].replace("_", "-")


@dataclass(frozen=True)
class Stage:
    name: str
    summary: str
    # Input tables -> output tables (`sws.runner.StageContext` -> `StageOutput`); None for a stage with `drive`.
    compute: Callable[[Any], Any] | None = None
    reads: tuple[str, ...] = ()
    writes: tuple[str, ...] = ()
    # The written tables that have a rejected-rows sidecar.
    rejects: tuple[str, ...] = ()
    # Read when present (a table whose stage may not have run); `<table>.rejected`: the rows rejected from it.
    optional_reads: tuple[str, ...] = ()
    # More tables read, named as the run holds them, by (config, adaptive round): earlier rounds' tables, say.
    more_reads: Callable[[Any, int], tuple[str, ...]] | None = None
    # More tables read when present, named as the run holds them (a later round's `rounds/<r>/...`, say).
    more_optional_reads: Callable[[Any, int], tuple[str, ...]] | None = None
    # The run folder (`sws.run_dir.RunDir`) its tables are read from, given its own: a later round reads the
    # round before's. None: its own.
    reads_from: Callable[[Any], Any] | None = None
    # What decides the outputs besides the inputs: (config, command options) -> a JSON-able dict.
    settings: Callable[[Any, dict[str, Any]], dict[str, Any]] | None = None
    # Files besides tables that decide the outputs (a model folder), and files written besides tables.
    input_files: Callable[[Any, Any], list[Any]] | None = None
    output_files: Callable[[Any, Any, dict[str, Any]], list[Any]] | None = None
    # Runs the stage itself, as (config, run folder, force, **options): a stage made of other stages.
    drive: Callable[..., Any] | None = None
    # Its outputs are float results (trained weights, sampled answers, distances): the float environment
    # (`sws.manifests.float_environment`) joins its settings, so another kernel or torch version reruns it.
    float_results: bool = False
    # The teacher roles it calls (checked before any model is called).
    roles: tuple[str, ...] = ()
    # More roles it calls under some configs only, given the config.
    config_roles: Callable[[Any], tuple[str, ...]] | None = None
    # The config section whose settings decide what it computes.
    section: str | None = None
    # Sends model calls and grading through `executor` (local or Ray).
    uses_executor: bool = False
    # A sub-step of `sws synthesize` (run by it, in `STAGE_MODULES` order).
    synthesis_step: bool = False
    # It records a funnel row (rows in, kept, rejected by reason) in its manifest.
    funnel: bool = False
    # The command that runs it; None: `sws <command_name>`, made from this declaration with `options`.
    command: str | None = None
    options: tuple[Option, ...] = field(default_factory=tuple)
    example: str = ""
    # Run by `sws run` (else by another stage, as synthesize runs extract, or only by its own command).
    in_run: bool = True
    # The step's name in `sws run`'s progress (default: the name).
    title: str = ""
    # Whether the config asks for this step (None: always); a step it does not ask for is skipped, and its roles
    # are not required.
    runs_when: Callable[[Any], bool] | None = None

    def is_on(self, cfg: Any) -> bool:
        return self.runs_when is None or self.runs_when(cfg)

    def roles_for(self, cfg: Any) -> tuple[str, ...]:
        """The roles it calls under `cfg`."""
        return self.roles + (self.config_roles(cfg) if self.config_roles else ())

    @property
    def command_name(self) -> str:
        """Its command's name: verb-noun words joined by hyphens, as every command is (`mix-selected`)."""
        return (self.command.split()[1] if self.command else self.name.replace("_", "-"))

    @property
    def how_to_run(self) -> str:
        return self.command or f"sws {self.command_name}"


@functools.cache
def all_stages() -> tuple[Stage, ...]:
    """Every declared stage, in the method's order."""
    stages: list[Stage] = []
    for entry in STAGE_MODULES:
        module_name, _, group = entry.partition(":")
        stages.extend(getattr(importlib.import_module(f"sws.stages.{module_name}"), group or "DECLARED"))
    return tuple(stages)


def get_stage(name: str) -> Stage:
    return next(stage for stage in all_stages() if stage.name == name)


def run_stages() -> tuple[Stage, ...]:
    """What `sws run` runs, in order."""
    return tuple(stage for stage in all_stages() if stage.in_run)


def synthesis_steps() -> tuple[Stage, ...]:
    return tuple(stage for stage in all_stages() if stage.synthesis_step)


def producer_of(table: str) -> str:
    """The command that writes `table`, for an error that finds it missing: the one `sws run` runs first. A stage
    that reads another run folder (a later round's inputs) is no way to make the table in this one."""
    writers = sorted((stage for stage in all_stages() if table in stage.writes and stage.reads_from is None),
                     key=lambda stage: not stage.in_run)
    commands = list(dict.fromkeys(stage.how_to_run for stage in writers))
    if not commands:
        raise KeyError(f"no stage declares that it writes '{table}'")
    return commands[0] + (f" (or {' or '.join(commands[1:])})" if len(commands) > 1 else "")
