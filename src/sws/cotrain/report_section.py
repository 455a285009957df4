"""The report's co-training section: per arm, the productive rate per step, productive, never-solved and
duplicate tasks per valid task, the sr histogram of the valid tasks over the second half, diversity (distinct
problems per batch, category entropy), the synthesizer's reward, the reasoner's rollouts per step and held-out
accuracy (with Retain and Learn), from the `cotrain/<arm>/metrics`, `cotrain/<arm>/validation` and
`cotrain/initial/validation` tables."""

from __future__ import annotations

from typing import Any

import polars as pl

from sws.cotrain.arms import COTRAIN_ARMS, INITIAL_VALIDATION
from sws.cotrain.summary import arm_numbers, second_half
from sws.plots import line_chart
from sws.report_html import Section, html_table, paragraph

TABLES = (*(name for arm in COTRAIN_ARMS for name in (arm.metrics, arm.validation)), INITIAL_VALIDATION)
TITLE = "Co-training (SynCo)"


def arm_rows(page: Any) -> list[dict[str, Any]]:
    rows = []
    for arm in COTRAIN_ARMS:
        metrics, validation = page.table(arm.metrics), page.table(arm.validation)
        if metrics is None or validation is None or metrics.height == 0:
            continue
        numbers = {name: None if value is None else round(value, 3)
                   for name, value in arm_numbers(metrics, validation, page.table(INITIAL_VALIDATION)).items()}
        half = second_half(metrics)
        histogram = [sum(bins) for bins in zip(*half["sr_histogram"].to_list(), strict=True)]
        rows.append({
            "arm": arm.name, "steps": metrics.height,
            "productive per generated (2nd half)": numbers["productive_rate"],
            "productive per valid (2nd half)": numbers["productive_of_valid"],
            "never solved per valid (2nd half)": numbers["never_solved_of_valid"],
            "duplicates per valid (2nd half)": numbers["duplicates_of_valid"],
            "acceptance": numbers["acceptance"],
            "sr histogram (quarters, 2nd half)": " / ".join(map(str, histogram)),
            "distinct problems per batch": numbers["distinct_problems"],
            "category entropy": round(float(half["category_entropy"].mean()), 3),
            "S reward (mean)": numbers["synth_reward_mean"],
            "R rollouts per step": round(numbers["reasoner_rollouts"], 1),
            "held-out accuracy": numbers["heldout_accuracy"],
            "Retain": numbers["retain"], "Learn": numbers["learn"],
        })
    return rows


def initial_line(initial: pl.DataFrame | None) -> str:
    if initial is None or initial.height == 0:
        return "The initial reasoner was not evaluated in this run, so Retain and Learn are empty."
    solved = int((initial["n_correct"] > 0).sum())
    return (f"The initial reasoner: held-out accuracy {float(initial['accuracy'].mean()):.3f}, {solved} of "
            f"{initial.height} tasks solved (Retain's) and {initial.height - solved} never (Learn's).")


def cotraining_section(page: Any) -> Section:
    """`page` is the report's Page."""
    rows = arm_rows(page)
    if not rows:
        return Section(TITLE, paragraph("No co-training arm in this run (set cotrain.arms; see docs/cotraining.md)."))
    series = {arm.name: page.table(arm.metrics)["productive_rate"].to_list() for arm in COTRAIN_ARMS
              if arm.name in {row["arm"] for row in rows}}
    figure = line_chart(series, title="Productive tasks (0 < sr < 1) per generated task, per step",
                        xlabel="step", ylabel="productive rate", ylim=(0, 1))
    return Section(TITLE, html_table(pl.DataFrame(rows)) + paragraph(
        "Productive: a valid task the reasoner solved in some but not all of its rollouts (0 < sr < 1), per task "
        "the synthesizer generated and per valid task; never solved: a valid task none of its rollouts solved "
        "(sr = 0); duplicates: cards rejected as a duplicate, per valid task (per valid: over all the valid tasks "
        "of the 2nd half together). The 2nd half is the last half of the steps. sr histogram: the valid tasks of "
        "the 2nd half by the share of rollouts solved, in quarters. R rollouts per step: the reasoner's, over "
        "all steps; every arm tops its valid cards up to the same number of tasks (earlier accepted tasks, then "
        "seed problems), so it is the same in every arm unless a step ran out of tasks. Held-out accuracy: the "
        "final reasoner on fresh problems of the seed categories, which no arm trained on; Retain: on those of "
        "them the initial reasoner solved (any of its answers right), Learn: on those it never solved. "
        + initial_line(page.table(INITIAL_VALIDATION)) + " One run's numbers; `sws compare` over seeds gives the "
        "differences with their standard errors.") + page.figure(figure, "cotrain_productive"))
