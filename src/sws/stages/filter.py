"""`sws filter --band LO HI`: keep the labeled problems the initially trained policy solves sometimes (DESIGN §1.4).

Two stages, plus the adaptive rounds between them when synthesize.adapt_rounds > 0:

- `score` (`sws.stages.score`): the policy's accuracy on each labeled problem, into `scored.parquet`.
- adaptive rounds r = 1 .. synthesize.adapt_rounds (`sws.stages.adapt`): the problems round r - 1 scored at
  accuracy 0 (and 1, with synthesize.adapt_harder) go back to the generator for an easier (harder) problem on
  the same concepts; round r's problems are rated, labeled and scored like round 0's, under `adapt/round-<r>/`.
- `filter`: every round's scored problems whose accuracy lies in the band (both ends inclusive) go to
  `filtered.parquet`, with the `round` that made them (0: the original synthesis); the others to
  `filtered.rejected.parquet` with their accuracy and the reason (`ungraded` when no sample was graded, since
  its difficulty is unknown; `policy_disagrees` when every policy sample states one answer other than the label,
  audit.policy_disagrees, which flags a likely wrong label at no model cost). A histogram of the accuracies is drawn to
  `plots/filter_accuracy.png`; the manifest's `kept_per_round` counts what each round added to the band.
"""

from __future__ import annotations

import functools
from pathlib import Path

import polars as pl

from sws import runner, ui
from sws.config import PipelineConfig, require_roles
from sws.llm_calls import shared_engines
from sws.manifests import StageResult
from sws.plots import new_figure, save_figure
from sws.policy import policy_role
from sws.run_dir import RunDir
from sws.runner import StageContext, StageOutput
from sws.stage import Stage
from sws.stages import adapt, score
from sws.stages.score import BAND_TOLERANCE
from sws.tables import INT, round_name

STAGE = "filter"
PLOT_NAME = "filter_accuracy.png"
# The reject reason of a problem none of whose samples could be graded in time.
UNGRADED = "ungraded: no policy answer was graded within grading.deadline_s"
# Every policy sample states one answer, and it is not the label: the label is suspect, whatever the band.
POLICY_DISAGREES = "policy_disagrees"


def run(cfg: PipelineConfig, run_dir: Path, force: bool = False) -> StageResult:
    """Score round 0's labels, run the adaptive rounds, then keep every round's problems in the band."""
    policy_role(cfg, run_dir)  # the initial checkpoint must exist before any adaptive round asks a teacher
    if cfg.synthesize.adapt_rounds:
        require_roles(cfg, ("generator", "judges", "labeler"), "synthesize.adapt_rounds")
    with shared_engines():
        for adapt_round in range(cfg.synthesize.adapt_rounds + 1):
            if adapt_round > 0:
                adapt.run_round(cfg, run_dir, adapt_round, force)
            runner.run(score.STAGE, cfg, run_dir, force, adapt_round=adapt_round)
    return runner.run_stage(BAND, cfg, run_dir, force)


def settings(cfg: PipelineConfig, options: dict) -> dict:
    return {"band": list(cfg.filter.band), "rollouts": cfg.filter.rollouts,
            "policy_disagrees": cfg.audit.policy_disagrees}


def scored_rounds(cfg: PipelineConfig, adapt_round: int) -> tuple[str, ...]:
    return tuple(round_name("scored", number) for number in range(cfg.synthesize.adapt_rounds + 1))


def accuracy_plot(cfg: PipelineConfig, run: RunDir, options: dict) -> list[Path]:
    return [run.plots / PLOT_NAME]


def keep_band(context: StageContext) -> StageOutput:
    """Every round's scored problems in the band, with their round, into `filtered`; the rest rejected."""
    cfg = context.cfg
    low, high = cfg.filter.band
    rounds = range(len(context.tables))
    scored = pl.concat([table.with_columns(pl.lit(adapt_round, dtype=INT).alias("round"))
                        for adapt_round, table in zip(rounds, context.tables.values(), strict=True)],
                       how="diagonal_relaxed")
    in_band = pl.col("accuracy").is_between(low - BAND_TOLERANCE, high + BAND_TOLERANCE).fill_null(False)
    contradicted = (pl.lit(cfg.audit.policy_disagrees) & (pl.col("n") > 0) & (pl.col("n_correct") == 0)
                    & pl.col("policy_answer").is_not_null()) if "policy_answer" in scored.columns else pl.lit(False)
    kept, rejected = scored.filter(in_band & ~contradicted), scored.filter(~in_band | contradicted)
    rejected = rejected.with_columns(
        pl.when(contradicted)
        .then(pl.lit(POLICY_DISAGREES))
        .when(pl.col("accuracy").is_null())
        .then(pl.lit(UNGRADED))
        .when(pl.col("accuracy") < low)
        .then(pl.lit(f"too hard: accuracy below {low:g}"))
        .otherwise(pl.lit(f"too easy: accuracy above {high:g}"))
        .alias("reject_reason")
    )
    plot = functools.partial(plot_accuracies, scored["accuracy"].drop_nulls().to_list(), (low, high),
                             cfg.filter.rollouts)
    per_round = {str(adapt_round): int((kept["round"] == adapt_round).sum()) for adapt_round in rounds}
    added = "" if len(rounds) == 1 else " (per round: " + ", ".join(
        f"{adapt_round}: {count}" for adapt_round, count in per_round.items()) + ")"
    ui.info(f"filter: kept {kept.height} of {scored.height} problems with accuracy in [{low:g}, {high:g}]{added}")
    return StageOutput(
        tables={"filtered": kept}, rejected={"filtered": rejected}, files={context.run.plots / PLOT_NAME: plot},
        rows_in=scored.height,
        info={
            "band": [low, high],
            "too_hard": int((scored["accuracy"] < low - BAND_TOLERANCE).sum()),
            "too_easy": int((scored["accuracy"] > high + BAND_TOLERANCE).sum()),
            "ungraded": int(scored["accuracy"].is_null().sum()),
            POLICY_DISAGREES: int((rejected["reject_reason"] == POLICY_DISAGREES).sum()),
            "accuracy_counts": {str(k): int(v) for k, v in scored["n_correct"].value_counts(sort=True).iter_rows()},
            "kept_per_round": per_round,
        },
    )


def plot_accuracies(accuracies: list[float], band: tuple[float, float], rollouts: int, path: Path) -> Path:
    """Histogram of per-problem accuracy (one bar per possible value), the kept band shaded."""
    figure, axes = new_figure()
    edges = [(index - 0.5) / rollouts for index in range(rollouts + 2)]
    axes.hist(accuracies, bins=edges, color="tab:blue", edgecolor="white")
    axes.axvspan(band[0], band[1], color="tab:green", alpha=0.15, label=f"kept band [{band[0]:g}, {band[1]:g}]")
    axes.set_xlabel(f"accuracy of the initial policy ({rollouts} samples)")
    axes.set_ylabel("problems")
    axes.set_title("Difficulty filter")
    axes.legend(loc="best", fontsize=8)
    return save_figure(figure, path)


BAND = Stage(
    STAGE, "Keep the scored problems whose accuracy lies in the band.", keep_band, more_reads=scored_rounds,
    writes=("filtered",), rejects=("filtered",), settings=settings, output_files=accuracy_plot, funnel=True,
    section="filter", in_run=False)
DECLARED = (Stage(
    STAGE, "Keep the labeled problems the initially trained policy solves sometimes, neither never nor always.",
    drive=run, writes=("filtered",), section="filter", uses_executor=True, command="sws filter", funnel=True),)
