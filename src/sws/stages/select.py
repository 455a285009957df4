"""`sws select --pool FILE`: weakness-driven selection (the SwS paper's §4.3): instead of writing new problems,
take the pool problems nearest to the run's weak ones, under the synthesis budget's split by fail ratio.

Reads the pool through `sws prepare`'s reader and schema (a JSON list, JSONL or Parquet file; fields as
`prepare`'s options name them, else the usual names), `weakness.parquet`, `categories.parquet` and
`problems.parquet`; writes `selected.parquet` (problem_id, problem, answer, category, source = `sel/<pool>`,
distance, nearest_weak_id) and `selected.rejected.parquet`. Per category with weak problems, `select.budget`
is split by `share` (the largest-remainder rule synthesis uses); each pool problem's distance is the cosine
distance of its embedding (the run's embedder) to the nearest weak problem of its category, and the nearest
come first, each at most once. A pool problem that duplicates a seed problem, a reference (benchmark) problem
or an earlier pool problem is rejected by the rule generate uses (`reference_index`); so is one of a category
without weak problems, and one past its category's budget (`beyond_budget`).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import polars as pl

from sws import ui
from sws.artifacts import (
    STR,
    StageResult,
    read_records,
    read_table,
    rejected_path,
    run_stage,
    table_path,
    write_rejected,
    write_table,
)
from sws.budget import largest_remainder
from sws.config import PipelineConfig
from sws.embeddings import embed_texts
from sws.errors import UserError
from sws.stage import Option, Stage
from sws.stages.generate import reference_index
from sws.stages.prepare import normalize_records

STEP = "select"
PROBLEM_COLUMNS = ("problem_id", "problem", "answer", "category", "source")


def category_budgets(categories: pl.DataFrame, budget: int) -> dict[str, int]:
    """`budget` split by `share` over the categories with weak problems."""
    shares = {category: share for category, share in categories.select("category", "share").iter_rows() if share > 0}
    return largest_remainder(shares, budget) if shares else {}


def nearest_weak(pool: np.ndarray, weak: np.ndarray, weak_ids: list[str]) -> tuple[np.ndarray, list[str]]:
    """Per pool row: the cosine distance to its nearest weak problem (rows are L2-normalised), and that one's id."""
    similarity = pool @ weak.T
    nearest = similarity.argmax(axis=1)
    return 1.0 - similarity[np.arange(len(pool)), nearest], [weak_ids[index] for index in nearest]


def select(pool: pl.DataFrame, weak: pl.DataFrame, budgets: dict[str, int], embed) -> tuple[pl.DataFrame, list[dict]]:
    """The nearest pool problems per category under its budget, and the rows past it (rejected)."""
    selected, beyond = [], []
    for category, quota in budgets.items():
        candidates = pool.filter(pl.col("category") == category)
        weak_here = weak.filter(pl.col("category") == category)
        if candidates.height == 0 or weak_here.height == 0:
            continue
        distances, nearest_ids = nearest_weak(embed(candidates["problem"].to_list()),
                                              embed(weak_here["problem"].to_list()), weak_here["problem_id"].to_list())
        ranked = candidates.with_columns(pl.Series("distance", distances.astype(np.float64)),
                                         pl.Series("nearest_weak_id", nearest_ids, dtype=STR))
        ranked = ranked.with_row_index("position").sort(["distance", "position"]).drop("position")
        selected.append(ranked.head(quota))
        beyond.extend({**row, "reject_reason": "beyond_budget"} for row in ranked.slice(quota).iter_rows(named=True))
    columns = {**{name: STR for name in PROBLEM_COLUMNS}, "distance": pl.Float64, "nearest_weak_id": STR}
    kept = pl.concat([frame.select(*columns) for frame in selected]) if selected else pl.DataFrame(schema=columns)
    return kept, beyond


def run(cfg: PipelineConfig, run_dir: Path, force: bool = False) -> StageResult:
    run_dir = Path(run_dir)
    if cfg.select.pool is None:
        raise UserError("select.pool: no pool given; pass --pool FILE (a JSON list, JSONL or Parquet file of problems)")
    pool_path = Path(cfg.select.pool)
    if not pool_path.is_file():
        raise UserError(f"{pool_path}: file not found (select.pool); pass a JSON list, JSONL or Parquet file")
    inputs = [pool_path, *(table_path(run_dir, name) for name in ("problems", "weakness", "categories"))]
    outputs = [table_path(run_dir, "selected"), rejected_path(run_dir, "selected")]

    def body() -> StageResult:
        pool, rejected = normalize_records(read_records(pool_path), pool_path, cfg.prepare, None)
        pool = pool.with_columns(source=pl.lit(f"sel/{pool_path.stem}"))
        duplicates = reference_index(cfg, run_dir)
        fresh, rejected_rows = [], [dict(row) for row in rejected.iter_rows(named=True)]
        for row in pool.iter_rows(named=True):
            match = duplicates.find(row["problem"])
            if match is None:
                duplicates.add(row["problem"], f"pool:{row['problem_id']}")
                fresh.append(row)
            else:
                rejected_rows.append({**row, "reject_reason": f"duplicate_of_{match.split(':', 1)[0]}"})
        fresh_pool = pl.DataFrame(fresh, schema=pool.schema)
        budgets = category_budgets(read_table(run_dir, "categories"), cfg.select.budget)
        rejected_rows += [{**row, "reject_reason": "category_without_weakness"}
                          for row in fresh_pool.filter(~pl.col("category").is_in(list(budgets))).iter_rows(named=True)]
        weakness = read_table(run_dir, "weakness").filter(pl.col("weak")).select("problem_id")
        weak = read_table(run_dir, "problems").join(weakness, on="problem_id", how="semi")

        def embed(texts: list[str]) -> np.ndarray:
            return embed_texts(texts, cfg.roles.embedder, run_dir)

        selected, beyond = select(fresh_pool, weak, budgets, embed)
        write_table(run_dir, "selected", selected)
        rejected_frame = pl.DataFrame([*rejected_rows, *beyond], infer_schema_length=None)
        write_rejected(run_dir, "selected", rejected_frame if rejected_frame.height else
                       pl.DataFrame(schema={**pool.schema, "reject_reason": STR}))
        reasons = dict(Counter(row["reject_reason"] for row in [*rejected_rows, *beyond]))
        ui.info(f"{STEP}: {selected.height} of {pool.height + rejected.height} pool problems selected "
                f"(budget {cfg.select.budget}) -> {outputs[0]}")
        return StageResult(STEP, rows={"selected": selected.height}, info={
            "per_category": dict(Counter(selected["category"].to_list())), "budgets": budgets, "rejected": reasons})

    return run_stage(run_dir, STEP, config={"select": cfg.select.model_dump(mode="json"), "prepare":
                                            cfg.prepare.model_dump(mode="json", exclude={"input", "preset"}),
                                            "embedder": cfg.roles.embedder.model,
                                            "references": cfg.synthesize.reference_files},
                     inputs=inputs, outputs=outputs, body=body, force=force)


DECLARED = (Stage(
    STEP, "Take the pool problems nearest to the weak ones, per category under the fail-ratio budget (no "
    "generation).", run, reads=("problems", "weakness", "categories"), writes=("selected",), section="select",
    options=(Option("select.pool", "Pool of problems: a JSON list, JSONL or Parquet file.", str, "--pool"),
             Option("select.budget", "Problems to select in all (default 200).", int)),
    example="sws select --run runs/demo --pool pool.jsonl --budget 100", in_run=False),)
