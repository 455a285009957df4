"""The `sws` command line: one typer app; each command parses options, resolves the config, calls a stage."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

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


def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn a UserError into one line on stderr and exit code 2.

    typer >= 0.29 vendors its own click, so a `click.ClickException` subclass would escape as a traceback;
    `typer.Exit` is what typer's runner turns into an exit code.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except UserError as exc:
            print(f"error: {exc}", file=sys.stderr)
            raise typer.Exit(2) from None

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


@command(epilog="Example: sws synthesize --run runs/demo --steps extract,combine --budget 100")
def synthesize(
    run: RunOpt,
    steps: Annotated[
        str | None, typer.Option(help="Comma-separated sub-steps to run: extract,combine,generate,rate,label (default all).")
    ] = None,
    budget: Annotated[int | None, typer.Option(help="Concept sets (new problems) to sample in all (default 200).")] = None,
    config: PipelineOpt = None,
    force: ForceOpt = False,
) -> None:
    """Turn the weak problems into new problems with verified reference answers, and print the funnel."""
    from sws.stages import synthesize as stage

    chosen = stage.parse_steps(steps)
    cfg = resolve_config(run, config, {"synthesize.budget": budget})
    stage.run(cfg, run, force=force, steps=chosen)


@command(epilog="Example: sws mix --run runs/demo")
def mix(run: RunOpt, config: PipelineOpt = None, force: ForceOpt = False) -> None:
    """Build augmented.parquet: the seed problems plus the synthetic problems that passed every filter."""
    from sws.stages import mix as stage

    stage.run(resolve_config(run, config, {}), run, force=force)


@command(epilog="Example: sws export verl --run runs/demo --out runs/demo/verl/train.parquet")
def export(
    format: Annotated[str, typer.Argument(help="Target format: verl.")],
    run: RunOpt,
    out: Annotated[Path | None, typer.Option(help="Output Parquet (default <run>/verl/<table>.parquet).")] = None,
    table: Annotated[str, typer.Option(help="Problem set to export: augmented or problems.")] = "augmented",
    split: Annotated[str, typer.Option(help="Value of extra_info.split in every row.")] = "train",
    config: PipelineOpt = None,
    force: ForceOpt = False,
) -> None:
    """Write a problem set as verl's RL dataset Parquet (prompt, reward_model, extra_info)."""
    from sws.stages import export as stage

    if format != "verl":
        raise UserError(f"export format '{format}' is not known; use: sws export verl --run {run}")
    stage.run(resolve_config(run, config, {}), run, force=force, table=table, out=out, split=split)


@command("eval", epilog="Example: sws eval --run runs/demo --k 8")
def evaluate(
    run: RunOpt,
    k: Annotated[int | None, typer.Option(help="Samples per problem for Avg@k (default 8).")] = None,
    benchmarks: Annotated[
        str | None, typer.Option(help="Comma-separated held-out sets: arith, math500, aime24, aime25, gsm8k.")
    ] = None,
    config: PipelineOpt = None,
    force: ForceOpt = False,
) -> None:
    """Pass@1 and Avg@k of every checkpoint, and the share of the run's weak problems each now solves."""
    from sws.stages import evaluate as stage

    cfg = resolve_config(run, config, {
        "eval.k": k, "eval.benchmarks": benchmarks.split(",") if benchmarks else None,
    })
    stage.run(cfg, run, force=force)


@command(epilog="Example: sws report --run runs/demo")
def report(run: RunOpt, config: PipelineOpt = None, force: ForceOpt = False) -> None:
    """Write report.html: one self-contained page with every plot and table of the run."""
    from sws.stages import report as stage

    stage.run(resolve_config(run, config, {}), run, force=force)


@command("run", epilog="Example: sws run pipelines/demo.yaml --run runs/demo --seed 1")
def run_pipeline(
    pipeline: Annotated[Path, typer.Argument(help="Pipeline YAML, e.g. pipelines/demo.yaml.")],
    run: RunOpt,
    seed: Annotated[int | None, typer.Option(help="Override the pipeline's seed.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Rerun every stage, even those already done.")] = False,
) -> None:
    """Run every stage of a pipeline in order, skipping those already done; print the headline."""
    from sws import pipeline as runner

    cfg = resolve_config(run, pipeline, {"seed": seed})
    runner.run(cfg, run, force=force)
    runner.print_headline(run)


def main() -> None:
    app()
