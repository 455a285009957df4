"""The `sws` command line: one typer app; each command parses options, resolves the config, calls a stage."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import click
import typer

from sws import ui
from sws.config import PipelineConfig, load_run_config, save_run_config
from sws.errors import UserError

app = typer.Typer(
    help="sws: turn a preliminary RL run's failures into verified synthetic problems and an augmented RL run.\n\n"
    "Example: sws run pipelines/demo.yaml --run runs/demo",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


class _UserFacingError(click.ClickException):
    exit_code = 2

    def show(self, file: Any = None) -> None:
        print(f"error: {self.message}", file=sys.stderr)


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn a UserError into one line on stderr and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            raise _UserFacingError(str(exc)) from None

    return wrapper


def command(name: str | None = None, **kwargs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        app.command(name, **kwargs)(guarded(fn))
        return fn

    return register


RunOpt = Annotated[Path, typer.Option("--run", help="Run directory holding the artifacts.")]
PipelineOpt = Annotated[
    Path | None, typer.Option("--config", help="Pipeline YAML (default: the run's config.yaml, else defaults).")
]
ForceOpt = Annotated[bool, typer.Option("--force", help="Rerun even if the stage's manifest is current.")]


def resolve_config(run: Path, pipeline: Path | None, overrides: dict[str, Any]) -> PipelineConfig:
    """Load the config for a command, apply its options, and save the result as the run's config.yaml."""
    config = load_run_config(run, pipeline, overrides)
    save_run_config(run, config)
    return config


@app.callback()
def _main(quiet: Annotated[bool, typer.Option("--quiet", "-q", help="No progress bars or messages.")] = False):
    ui.set_quiet(quiet)


@command(epilog="Example: sws prepare --input ../shared/data/math_train.json --run runs/math")
def prepare(
    run: RunOpt,
    input: Annotated[Path, typer.Option("--input", help="Seed set: JSON list, JSONL or Parquet.")],
    preset: Annotated[
        str | None, typer.Option(help="Field layout of a known file: math, math500, aime24, aime25, gsm8k.")
    ] = None,
    problem_field: Annotated[str | None, typer.Option(help="Field holding the problem text.")] = None,
    answer_field: Annotated[str | None, typer.Option(help="Field holding the reference answer.")] = None,
    category_field: Annotated[str | None, typer.Option(help="Field holding the category.")] = None,
    id_field: Annotated[str | None, typer.Option(help="Field holding a stable id (else a content hash).")] = None,
    categories: Annotated[
        str | None, typer.Option(help="Comma-separated list of allowed categories (others are rejected).")
    ] = None,
    config: PipelineOpt = None,
    force: ForceOpt = False,
) -> None:
    """Normalise a seed problem set into problems.parquet (duplicates and unanswered rows rejected with a reason)."""
    from sws.stages import prepare as stage

    cfg = resolve_config(run, config, {
        "prepare.input": str(input), "prepare.preset": preset, "prepare.problem_field": problem_field,
        "prepare.answer_field": answer_field, "prepare.category_field": category_field,
        "prepare.id_field": id_field,
        "prepare.categories": categories.split(",") if categories else None,
    })
    stage.run(cfg, run, force=force)


@command(epilog="Example: sws identify --run runs/demo --max-acc 0.5 --min-records 2")
def identify(
    run: RunOpt,
    max_acc: Annotated[float | None, typer.Option(help="Weak if max accuracy is at most this (default 0.5).")] = None,
    max_slope: Annotated[float | None, typer.Option(help="Weak if the OLS slope is at most this (default 0).")] = None,
    strict: Annotated[bool | None, typer.Option("--strict/--inclusive", help="Use < instead of <=.")] = None,
    min_records: Annotated[int | None, typer.Option(help="Problems with fewer records are not weak.")] = None,
    config: PipelineOpt = None,
    force: ForceOpt = False,
) -> None:
    """Find the problems the policy keeps failing and each category's synthesis budget share."""
    from sws.stages import identify as stage

    cfg = resolve_config(run, config, {
        "identify.max_acc": max_acc, "identify.max_slope": max_slope, "identify.strict": strict,
        "identify.min_records": min_records,
    })
    stage.run(cfg, run, force=force)


def main() -> None:
    app()
