"""`sws identify`: the problems the policy keeps failing, and each category's share of the synthesis budget.

Reads `problems.parquet` and `rollouts.parquet`; writes `weakness.parquet` (every problem: `accs` = n_correct / n
ordered by step, `n_record`, `max_acc`, `slope` = OLS slope of accs against 0..n_record-1, `weak`),
`categories.parquet` (`n_problems, n_rolled_out, n_weak, n_persisting, fail_ratio, share`) and two plots under `plots/`.
A problem never rolled out has no accuracies (`max_acc`, `slope` null) and is not weak; one record gives slope 0.
The fail ratio is n_weak / n_rolled_out: problems the rollout log never saw cannot be weak, so counting them
would shift the budget away from categories the log covers only in part.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import polars as pl
from rich.table import Table

from sws import ui
from sws.config import IdentifyConfig, PipelineConfig
from sws.errors import UserError
from sws.plots import bar_chart, line_chart, save_figure
from sws.run_dir import RunDir
from sws.runner import StageContext, StageOutput
from sws.stage import Option, Stage

if TYPE_CHECKING:
    from matplotlib.figure import Figure

STEP = "identify"
TRAJECTORY_PLOT = "weak_trajectories.png"
FAIL_RATIO_PLOT = "category_fail_ratio.png"
MAX_TRAJECTORIES = 12


def check_rollouts(rollouts: pl.DataFrame, source: Path) -> None:
    """UserError on an empty log, nulls or impossible counts."""
    if rollouts.height == 0:
        raise UserError(f"{source}: has no rows; run `sws train initial` or `sws ingest` to log rollouts first")
    for column in ("step", "problem_id", "n", "n_correct"):
        if rollouts[column].null_count():
            raise UserError(f"{source}: column '{column}' has {rollouts[column].null_count()} null values; "
                            "every rollout row needs one")
    checks = {
        "n": (pl.col("n") <= 0, "must be at least 1"),
        "n_correct": ((pl.col("n_correct") < 0) | (pl.col("n_correct") > pl.col("n")), "must lie in 0..n"),
    }
    for column, (bad, rule) in checks.items():
        n_bad = rollouts.select(bad.sum()).item()
        if n_bad:
            raise UserError(f"{source}: column '{column}' {rule}, but {n_bad} rows break that; fix the rollout log")


def merge_repeated_records(rollouts: pl.DataFrame) -> pl.DataFrame:
    """One record per (step, problem_id): rows that repeat one are merged, their `n` and `n_correct` summed.

    A problem has one accuracy per step. A log appended twice, or a problem drawn twice in one step, must not
    count as two records: that would double its record count and flatten its slope. Summing keeps the step's
    accuracy for an exact repeat and pools the samples of a real second draw.
    """
    return rollouts.group_by("step", "problem_id", maintain_order=True).agg(pl.col("n").sum(), pl.col("n_correct").sum())


def record_stats(rollouts: pl.DataFrame) -> pl.DataFrame:
    """One row per problem in the log: `accs` (n_correct / n by step, ties in log order), `n_record`, `max_acc`, `slope`.

    Vectorised: one group-by collects each problem's accuracies in order (a log written in step order, as training
    writes it, needs no sort); slopes and maxima are per-problem sums over the flat values with numpy.
    """
    ordered = rollouts if rollouts["step"].is_sorted() else rollouts.sort("step", maintain_order=True)
    grouped = ordered.group_by("problem_id").agg(accs=pl.col("n_correct") / pl.col("n"))
    n_record = grouped["accs"].list.len().to_numpy().astype(np.int64)
    acc = grouped["accs"].explode().to_numpy()
    if acc.size == 0:
        return grouped.with_columns(n_record=n_record, max_acc=acc, slope=acc)
    starts = np.cumsum(n_record) - n_record
    position = np.arange(acc.size) - np.repeat(starts, n_record)
    # OLS slope = sum((x - mean x) * y) / sum((x - mean x)^2) with x = 0..N-1; (2x - (N-1)) keeps it integral, and
    # centring y on the first accuracy makes a flat trajectory's slope exactly 0 (the default rule is slope <= 0).
    centred_x = 2 * position - np.repeat(n_record - 1, n_record)
    covariance = np.add.reduceat(centred_x * (acc - np.repeat(acc[starts], n_record)), starts)
    denominator = n_record * (n_record.astype(np.float64) ** 2 - 1)
    slope = np.divide(6 * covariance, denominator, out=np.zeros(n_record.size), where=n_record > 1)
    return grouped.with_columns(n_record=n_record, max_acc=np.maximum.reduceat(acc, starts), slope=slope)


def unknown_problems(stats: pl.DataFrame, problems: pl.DataFrame) -> pl.DataFrame:
    """The rows of `stats` whose problem_id problems.parquet lacks."""
    return stats.filter(~pl.col("problem_id").is_in(problems["problem_id"].implode()))


def weak_rule(rule: IdentifyConfig) -> pl.Expr:
    """weak <=> enough records, max_acc and slope at most (each with its strict flag: below) their thresholds."""
    max_acc, slope = pl.col("max_acc"), pl.col("slope")
    low_acc = max_acc < rule.max_acc if rule.strict_max_acc else max_acc <= rule.max_acc
    flat = slope < rule.max_slope if rule.strict_slope else slope <= rule.max_slope
    enough = pl.col("n_record") >= max(rule.min_records, 1)
    return (enough & low_acc & flat).fill_null(False)


def weakness_table(problems: pl.DataFrame, stats: pl.DataFrame, rule: IdentifyConfig) -> pl.DataFrame:
    """Every problem, in problems.parquet order, with its `record_stats` (none if never rolled out) and `weak`."""
    return (
        problems.select("problem_id", "category")
        .join(stats, on="problem_id", how="left", maintain_order="left")
        .with_columns(
            pl.col("accs").fill_null(pl.lit([], dtype=pl.List(pl.Float64))),
            pl.col("n_record").fill_null(0),
        )
        .with_columns(weak=weak_rule(rule))
        .select("problem_id", "category", "accs", "n_record", "max_acc", "slope", "weak")
    )


def category_table(weakness: pl.DataFrame, prior_weak: pl.Series | None = None,
                   persist_weight: float = 1.0) -> pl.DataFrame:
    """Per category: problems, problems rolled out, weak ones, fail ratio (of the rolled-out problems) and share
    (0 everywhere if none weak).

    `prior_weak` (a later round of `sws run --rounds N`: the round before's weak problems) marks the weak problems
    that persist (`n_persisting`); each counts `persist_weight` times in its category's share.
    """
    persisting = pl.col("weak") & pl.col("problem_id").is_in(
        (prior_weak if prior_weak is not None else pl.Series([], dtype=pl.Utf8)).implode())
    per_category = (
        weakness.group_by("category")
        .agg(
            n_problems=pl.len().cast(pl.Int64),
            n_rolled_out=(pl.col("n_record") > 0).sum().cast(pl.Int64),
            n_weak=pl.col("weak").sum().cast(pl.Int64),
            n_persisting=persisting.sum().cast(pl.Int64),
        )
        .sort("category")
        .with_columns(fail_ratio=pl.when(pl.col("n_rolled_out") > 0)
                      .then(pl.col("n_weak") / pl.col("n_rolled_out")).otherwise(0.0))
    )
    weighted = (pl.col("fail_ratio") + pl.when(pl.col("n_rolled_out") > 0).then(
        (persist_weight - 1) * pl.col("n_persisting") / pl.col("n_rolled_out")).otherwise(0.0))
    per_category = per_category.with_columns(weighted=weighted)
    total = per_category["weighted"].sum()
    share = pl.col("weighted") / total if total > 0 else pl.lit(0.0)
    return per_category.with_columns(share=share).select(
        "category", "n_problems", "n_rolled_out", "n_weak", "n_persisting", "fail_ratio", "share"
    )


def trajectory_figure(weakness: pl.DataFrame, seed: int) -> Figure:
    weak = weakness.filter(pl.col("weak"))
    shown = weak.sample(min(MAX_TRAJECTORIES, weak.height), seed=seed).sort("problem_id")
    series = {f"{row['problem_id'][:12]} ({row['category']})": row["accs"] for row in shown.iter_rows(named=True)}
    return line_chart(
        series, title=f"Accuracy of {shown.height} sampled weak problems (of {weak.height})",
        xlabel="record (times rolled out)", ylabel="accuracy", ylim=(-0.02, 1.02), empty_note="no weak problems",
    )


def fail_ratio_figure(categories: pl.DataFrame) -> Figure:
    ratios = dict(zip(categories["category"].to_list(), categories["fail_ratio"].to_list(), strict=True))
    return bar_chart(ratios, title="Share of weak problems per category", ylabel="fail ratio", ylim=(0, 1))


def print_summary(categories: pl.DataFrame) -> None:
    table = Table(title="Weak problems per category")
    table.add_column("category", no_wrap=True, min_width=max(map(len, categories["category"]), default=8))
    for header in ("problems", "rolled out", "weak", "fail ratio", "share"):
        table.add_column(header, justify="right")
    for row in categories.iter_rows(named=True):
        table.add_row(row["category"], str(row["n_problems"]), str(row["n_rolled_out"]), str(row["n_weak"]),
                      f"{row['fail_ratio']:.3f}", f"{row['share']:.3f}")
    n_problems, n_rolled_out, n_weak = (categories[column].sum() for column in ("n_problems", "n_rolled_out", "n_weak"))
    table.add_row("all", str(n_problems), str(n_rolled_out), str(n_weak),
                  f"{n_weak / n_rolled_out if n_rolled_out else 0.0:.3f}", "", style="bold")
    ui.console.print(table)


def settings(cfg: PipelineConfig, options: dict) -> dict:
    # persist_weight counts only in a later round, which has prior_weak; a changed weight reruns round 1 too.
    return {"identify": cfg.identify.model_dump(mode="json"), "seed": cfg.seed,
            "persist_weight": cfg.rounds.persist_weight}


def plots(cfg: PipelineConfig, run: RunDir, options: dict) -> list[Path]:
    return [run.plots / TRAJECTORY_PLOT, run.plots / FAIL_RATIO_PLOT]


def identify(context: StageContext) -> StageOutput:
    """Each problem's accuracy record and weakness, and each category's share of the budget."""
    cfg = context.cfg
    problems, rollouts = context.table("problems"), context.table("rollouts")
    problems_path, rollouts_path = context.source("problems"), context.source("rollouts")
    if problems.height == 0:
        raise UserError(f"{problems_path}: has no rows; run `sws prepare` with a non-empty seed set")
    if problems["problem_id"].n_unique() != problems.height:
        raise UserError(f"{problems_path}: column 'problem_id' repeats values; rerun `sws prepare`")
    check_rollouts(rollouts, rollouts_path)
    records = merge_repeated_records(rollouts)
    stats = record_stats(records)
    unknown = unknown_problems(stats, problems)
    if unknown.height:
        raise UserError(
            f"{rollouts_path}: {unknown['n_record'].sum()} records name {unknown.height} problem_ids missing "
            f"from problems.parquet (e.g. '{unknown['problem_id'][0]}'); log rollouts of this run's problems "
            "(`sws ingest` checks that)"
        )
    n_merged = rollouts.height - records.height
    if n_merged:
        ui.info(f"{STEP}: {rollouts_path}: merged {n_merged} rows that repeat a (step, problem_id) into "
                "the row before them (n and n_correct summed)")
    weakness = weakness_table(problems, stats, cfg.identify)
    prior_weak = context.tables.get("prior_weak")
    categories = category_table(weakness, None if prior_weak is None else prior_weak["problem_id"],
                                cfg.rounds.persist_weight)
    trajectories, fail_ratios = plots(cfg, context.run, context.options)
    n_weak = int(weakness["weak"].sum())
    ui.info(f"{STEP}: {n_weak} of {weakness.height} problems are weak ({rollouts.height} rollout records) "
            "-> weakness.parquet")
    print_summary(categories)
    return StageOutput(
        tables={"weakness": weakness, "categories": categories},
        files={trajectories: functools.partial(save_figure, trajectory_figure(weakness, cfg.seed)),
               fail_ratios: functools.partial(save_figure, fail_ratio_figure(categories))},
        info={"n_weak": n_weak, "n_rollouts": rollouts.height, "n_merged_rows": n_merged})


STAGE = Stage(
    STEP, "Find the problems the policy keeps failing and each category's synthesis budget share.", identify,
    # prior_weak: only in a later round of `sws run --rounds N`, the round before's weak problems.
    reads=("problems", "rollouts"), optional_reads=("prior_weak",), writes=("weakness", "categories"),
    settings=settings, output_files=plots, section="identify",
    options=(
        Option("identify.max_acc", "Weak if max accuracy is at most this.", float),
        Option("identify.max_slope", "Weak if the OLS slope is at most this.", float),
        Option("identify.strict_max_acc", "Weak only if max accuracy is below max_acc (< instead of <=).", bool,
               "--strict-max-acc/--inclusive-max-acc"),
        Option("identify.strict_slope", "Weak only if the slope is below max_slope (< instead of <=); a never-solved "
               "problem (slope 0) is then not weak.", bool, "--strict-slope/--inclusive-slope"),
        Option("identify.min_records", "Problems with fewer records are not weak.", int),
    ),
    example="sws identify --run runs/demo --max-acc 0.5 --min-records 2")
DECLARED = (STAGE,)
