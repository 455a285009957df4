"""`sws world seed-set|pool|bootstrap|accuracy`: the arith world's own commands."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from sws import ui
from sws.worlds.arith.settings import ArithSettings


def built_in(field: str) -> str:
    """How help names the default of an option that stands for an arith setting (these commands read no run)."""
    return f"\\[default: {getattr(ArithSettings(), field)}, arith.{field}'s built-in value]"  # \\[: not rich markup


CategoriesOpt = Annotated[str | None, typer.Option(help="Comma-separated arith categories. \\[default: all six]")]
NPerCategoryOpt = Annotated[
    int | None, typer.Option(help=f"Fresh problems per category, levels mixed. {built_in('n_eval_per_category')}",
                              min=1)
]


def seed_set(
    out: Annotated[Path, typer.Option("--out", help="JSONL file to write (id, problem, answer, category, ...).")],
    n: Annotated[int | None, typer.Option("--n", help=f"Number of problems. {built_in('n_seed_problems')}",
                                                   min=1)] = None,
    seed: Annotated[int, typer.Option(help="Seed of the problem draw.", min=0)] = 0,
    categories: CategoriesOpt = None,
    levels: Annotated[str | None, typer.Option(help="Comma-separated levels: easy, medium, hard. \\[default: all]")] = None,
) -> None:
    """Write an arith seed problem set (categories in turn, levels mixed) that `sws prepare` reads."""
    from sws.worlds.arith.seed_set import write_seed_set

    count = write_seed_set(
        out, ArithSettings().n_seed_problems if n is None else n, seed,
        categories.split(",") if categories else None, levels.split(",") if levels else None,
    )
    ui.info(f"wrote {count} arith problems to {out}")


def pool(
    run: Annotated[Path, typer.Option(help="Run directory after `sws prepare` (its seed set and config).")],
    out: Annotated[Path, typer.Option("--out", help="JSONL file to write (id, problem, answer, category, ...).")],
    n: Annotated[int | None, typer.Option(
        "--n", help="Number of pool problems. \\[default: the run's arith.n_pool_problems]", min=1)] = None,
) -> None:
    """Write a selection pool for `sws select`: fresh problems of every family, none a seed or held-out problem."""
    from sws.config import load_run_config
    from sws.errors import UserError
    from sws.run_dir import RunDir
    from sws.tables import read_table
    from sws.worlds.arith.pool import write_pool

    if not RunDir(run).table("problems").exists():
        raise UserError(f"{RunDir(run).table('problems')}: not found; run `sws prepare --run {run}` first")
    cfg = load_run_config(run)
    count = write_pool(out, cfg, read_table(run, "problems"), cfg.world_settings.n_pool_problems if n is None else n)
    ui.info(f"wrote {count} arith pool problems to {out}")


def bootstrap(
    out: Annotated[Path | None, typer.Option(help="Policy folder to write. \\[default: the cache, ~/.cache/sws]")] = None,
    steps: Annotated[int | None, typer.Option(help=f"Supervised steps. {built_in('bootstrap_steps')}")] = None,
    seed: Annotated[int, typer.Option(help="Seed of the weights and the training data.")] = 0,
    misconception_rate: Annotated[float | None, typer.Option(
        help=f"Share of carrying and borrowing examples answered wrongly. {built_in('misconception_rate')}",
        min=0.0, max=1.0)] = None,
    n_per_category: NPerCategoryOpt = None,
) -> None:
    """Warm-start the tiny policy on an uneven mix (reused if cached), then print its accuracy per category."""
    from sws.worlds.arith.bootstrap import bootstrap_policy

    folder = bootstrap_policy(out, steps, seed, misconception_rate)
    print(folder)
    _print_accuracy(folder, n_per_category, 12345, f"greedy accuracy of {folder}")


def accuracy(
    model: Annotated[Path, typer.Option(help="Policy folder (a Hugging Face model directory).")],
    n_per_category: NPerCategoryOpt = None,
    seed: Annotated[int, typer.Option(help="Seed of the fresh problems.")] = 12345,
) -> None:
    """Print a policy's greedy accuracy on fresh arith problems, per category and level."""
    _print_accuracy(model, n_per_category, seed, f"greedy accuracy of {model}")


def _print_accuracy(model: Path, n_per_category: int | None, seed: int, title: str) -> None:
    from sws.worlds.arith.evaluation import accuracy_table, graded_problems

    n = ArithSettings().n_eval_per_category if n_per_category is None else n_per_category
    ui.stdout_console().print(accuracy_table(graded_problems(model, n, seed), title))


def add_commands(group: typer.Typer, command: Any) -> None:
    command("seed-set", group=group,
            epilog="Example: sws world seed-set --out runs/demo/seed.jsonl --n 600 --seed 0")(seed_set)
    command("pool", group=group,
            epilog="Example: sws world pool --run runs/demo --out runs/demo/pool.jsonl --n 3000")(pool)
    command("bootstrap", group=group, epilog="Example: sws world bootstrap --steps 1500 --seed 0")(bootstrap)
    command("accuracy", group=group,
            epilog="Example: sws world accuracy --model runs/demo/train/initial/final")(accuracy)
