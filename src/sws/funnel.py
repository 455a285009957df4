"""The synthesis funnel: per step, rows in, rows kept, rows rejected by reason, and completions cut off.

A step's `truncated` counts its completions that hit max_tokens (of `completions` in all), so a user sees
which role's max_tokens to raise; a step that reads its replies and asks again for those it cannot use also counts
the replies it set aside, by reason (`replies_rejected`), so a user sees what the model gets wrong.

Each synthesis step stores its row as `info["funnel"]` of its StageResult, which `run_stage` keeps in the
step's manifest; `read_funnel` collects them for the report, `funnel_table` renders them with rich. The readers
of manifests here take the run's folder or a reader of its manifests (`sws.runner.StageContext.manifest`).
`budget_spending` shows per category how its share of the budget was spent, from combine's `spending` and
generate's `per_category` counts.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
from rich.table import Table

from sws import tokens
from sws.engines.base import Completion
from sws.errors import UserError
from sws.manifests import read_manifest
from sws.run_dir import RunDir

# A run's manifests: its folder, or a reader of a stage's manifest by the stage's name.
Manifests = Path | Callable[[str], "dict[str, Any] | None"]


def manifest_reader(manifests: Manifests) -> Callable[[str], dict[str, Any] | None]:
    return manifests if callable(manifests) else functools.partial(read_manifest, manifests)


@dataclass(frozen=True)
class FunnelRow:
    step: str
    rows_in: int
    kept: int
    rejected: dict[str, int] = field(default_factory=dict)
    truncated: int = 0
    completions: int = 0
    replies_rejected: dict[str, int] = field(default_factory=dict)

    def as_info(self) -> dict[str, Any]:
        info = {"step": self.step, "in": self.rows_in, "kept": self.kept, "rejected": dict(self.rejected)}
        if self.completions:  # only steps that asked a model
            info |= {"truncated": self.truncated, "completions": self.completions}
        if self.replies_rejected:
            info["replies_rejected"] = dict(self.replies_rejected)
        return info

    @classmethod
    def from_info(cls, info: dict[str, Any]) -> FunnelRow:
        return cls(info["step"], int(info["in"]), int(info["kept"]), most_first(info.get("rejected", {})),
                   int(info.get("truncated", 0)), int(info.get("completions", 0)),
                   most_first(info.get("replies_rejected", {})))


def most_first(counts: dict[str, int]) -> dict[str, int]:
    """Reasons by count, the most frequent first (ties by name; a manifest keeps them by name)."""
    return dict(sorted(dict(counts).items(), key=lambda item: (-item[1], item[0])))


def funnel_row(step: str, rows_in: int, kept: int, reasons: Iterable[str], completions: Iterable[Completion] = (),
               replies_rejected: Iterable[str] = ()) -> FunnelRow:
    answered = list(completions)
    return FunnelRow(step, rows_in, kept, most_first(Counter(reasons)),
                     sum(completion.truncated for completion in answered), len(answered),
                     most_first(Counter(replies_rejected)))


def read_funnel(manifests: Manifests, steps: Sequence[str]) -> list[FunnelRow]:
    """The funnel rows kept in the manifests of `steps` (steps never run are left out)."""
    manifest_of = manifest_reader(manifests)
    rows = []
    for step in steps:
        manifest = manifest_of(step)
        if manifest is not None and "funnel" in manifest["info"]:
            try:
                rows.append(FunnelRow.from_info(manifest["info"]["funnel"]))
            except (KeyError, TypeError, ValueError):
                where = f"manifest of {step}" if callable(manifests) else RunDir(manifests).manifest(step)
                raise UserError(f"{where}: field 'info.funnel' is not the funnel row sws writes; delete the file "
                                "and rerun the step") from None
    return rows


SPENDING_COLUMNS = {
    "budget": "budgeted sets", "set_size": "set size", "distinct": "distinct sets", "level_filled": "level-filled",
    "instance_filled": "instance-filled", "generated": "generated", "near_duplicate": "near-duplicates",
    "kept": "kept after dedup",
}


# combine's shares of the requested sets: inside one weak problem's concept list, all shown by some problem of the
# category (null where the world cannot say).
REQUEST_SHARES = {"within_one_weak_problem": "in one weak list", "showable": "showable"}


def budget_spending(combine_info: dict[str, Any], generate_info: dict[str, Any] | None) -> pl.DataFrame:
    """Per category: budgeted sets, their size, distinct sets drawn, level- and instance-filled sets, the shares of
    requested sets inside one weak problem's concept list and that the category can show (combine), then problems
    generated, dropped as near-duplicates and kept by generate's pre-filters (null before generate ran)."""
    generated = (generate_info or {}).get("per_category", {})
    requested = combine_info.get("requested", {})
    rows = [{"category": category, **spent, **requested.get(category, {}), **generated.get(category, {})}
            for category, spent in sorted(combine_info.get("spending", {}).items())]
    schema = {"category": pl.Utf8, **dict.fromkeys(SPENDING_COLUMNS, pl.Int64),
              **dict.fromkeys(REQUEST_SHARES, pl.Float64)}
    return (pl.DataFrame(rows, schema=schema).rename(SPENDING_COLUMNS | REQUEST_SHARES)
            .with_columns(pl.col(list(REQUEST_SHARES.values())).round(3)))


def read_budget_spending(manifests: Manifests, combine_step: str, generate_step: str) -> pl.DataFrame | None:
    """`budget_spending` from the steps' manifests; None before combine ran."""
    manifest_of = manifest_reader(manifests)
    combine, generate = manifest_of(combine_step), manifest_of(generate_step)
    if combine is None or "spending" not in combine.get("info", {}):
        return None
    return budget_spending(combine["info"], generate["info"] if generate else None)


def dataframe_table(df: pl.DataFrame, title: str) -> Table:
    table = Table(title=title)
    for index, column in enumerate(df.columns):
        table.add_column(column, justify="left" if index == 0 else "right")
    for row in df.iter_rows():
        table.add_row(*("-" if value is None else str(value) for value in row))
    return table


def funnel_table(rows: Sequence[FunnelRow]) -> Table:
    table = Table(title="synthesis funnel")
    for column in ("step", "in", "kept", "rejected", "rejected by reason", "cut off"):
        table.add_column(column, justify="left" if column in ("step", "rejected by reason") else "right")
    for row in rows:
        reasons = ", ".join(f"{reason} {count}" for reason, count in row.rejected.items()) or "-"
        table.add_row(row.step, str(row.rows_in), str(row.kept), str(sum(row.rejected.values())), reasons,
                      f"{row.truncated}/{row.completions}")
    return table


def truncation_advice(rows: Sequence[FunnelRow], roles: dict[str, str]) -> list[str]:
    """One line per step whose completions hit max_tokens, naming the config field to raise."""
    return [f"{row.step}: {row.truncated} of {row.completions} completions hit max_tokens and were not used as "
            f"finished; raise {roles.get(row.step, 'max_tokens of its role')}"
            for row in rows if row.truncated]


def token_usage(manifests: Manifests, stages: Sequence[str], pricing: dict[str, Any]) -> pl.DataFrame:
    """`tokens_table` of what the manifests of `stages` record."""
    manifest_of = manifest_reader(manifests)
    return tokens_table({stage: (manifest_of(stage) or {}).get("tokens") or {} for stage in stages}, pricing)


def tokens_table(used_by_stage: dict[str, tokens.TokenCounts], pricing: dict[str, Any]) -> pl.DataFrame:
    """Per stage that called a model and per role: prompt and completion tokens, completions, and their cost in
    dollars when `pricing` prices the role; then a `total` row (none when no stage recorded tokens)."""
    rows, total = [], {}
    for stage, used_by_role in used_by_stage.items():
        for role, used in sorted(used_by_role.items()):
            rows.append({"step": stage, "role": role, "prompt tokens": used["prompt"],
                         "completion tokens": used["completion"], "completions": used["completions"],
                         "cost ($)": tokens.cost({role: used}, pricing)})
            total = tokens.add(total, {role: used})
    schema = {"step": pl.Utf8, "role": pl.Utf8, "prompt tokens": pl.Int64, "completion tokens": pl.Int64,
              "completions": pl.Int64, "cost ($)": pl.Float64}
    if rows:
        prompt, completion = (sum(used[name] for used in total.values()) for name in ("prompt", "completion"))
        rows.append({"step": "total", "role": "", "prompt tokens": prompt, "completion tokens": completion,
                     "completions": sum(used["completions"] for used in total.values()),
                     "cost ($)": tokens.cost(total, pricing)})
    return pl.DataFrame(rows, schema=schema)


def per_kept_problem(usage: pl.DataFrame, kept: int, what: str) -> str:
    """A line with the total tokens (and cost) of `token_usage` per kept problem."""
    if not usage.height or not kept:
        return f"no {what} problem kept: no tokens per kept problem"
    total = usage.row(-1, named=True)
    tokens_each = (total["prompt tokens"] + total["completion tokens"]) / kept
    cost = f", ${total['cost ($)'] / kept:.4g}" if total["cost ($)"] is not None else ""
    return f"{tokens_each:,.0f} tokens{cost} per {what} problem ({kept} kept)"
