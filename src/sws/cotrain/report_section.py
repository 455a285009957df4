"""The report's co-training section: per arm, the productive rate per step, the sr histogram of the valid tasks
over the second half, diversity (distinct problems per batch, category entropy), the synthesizer's reward and the
reasoner's held-out accuracy, from the `cotrain/<arm>/metrics` and `cotrain/<arm>/validation` tables."""

from __future__ import annotations

from typing import Any

import polars as pl

from sws.cotrain.arms import COTRAIN_ARMS
from sws.plots import line_chart
from sws.report_html import Section, html_table, paragraph

TABLES = tuple(name for arm in COTRAIN_ARMS for name in (arm.metrics, arm.validation))
TITLE = "Co-training (SynCo)"


def arm_rows(page: Any) -> list[dict[str, Any]]:
    rows = []
    for arm in COTRAIN_ARMS:
        metrics, validation = page.table(arm.metrics), page.table(arm.validation)
        if metrics is None or validation is None or metrics.height == 0:
            continue
        half = metrics.filter(pl.col("step") >= (metrics.height // 2))
        histogram = [sum(bins) for bins in zip(*half["sr_histogram"].to_list(), strict=True)]
        rows.append({
            "arm": arm.name, "steps": metrics.height,
            "productive per generated (2nd half)": round(float(half["productive_rate"].mean()), 3),
            "productive per valid (2nd half)": round(float(half["productive_of_valid"].mean()), 3),
            "acceptance": round(float(half["acceptance"].mean()), 3),
            "sr histogram (quarters, 2nd half)": " / ".join(map(str, histogram)),
            "distinct problems per batch": round(float(half["distinct_problems"].mean()), 3),
            "category entropy": round(float(half["category_entropy"].mean()), 3),
            "S reward (mean)": round(float(half["synth_reward_mean"].mean()), 3),
            "held-out accuracy": round(float(validation["accuracy"].mean()), 3) if validation.height else None,
        })
    return rows


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
        "the synthesizer generated; the 2nd half is the last half of the steps. sr histogram: the valid tasks of "
        "the 2nd half by the share of rollouts solved, in quarters. Held-out accuracy: the final reasoner on "
        "fresh problems of the seed categories, which no arm trained on. One run's numbers; `sws compare` over "
        "seeds gives the differences with their standard errors.") + page.figure(figure, "cotrain_productive"))
