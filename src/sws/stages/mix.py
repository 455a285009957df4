"""`sws mix`: the augmented training set, seed problems ∪ the synthetic problems that passed every filter.

Synthetic rows keep their `syn_id` as `problem_id` and get `source = "syn/<generator model>"`. A synthetic
problem whose text repeats a seed problem (or an earlier synthetic one), or whose id is already taken, goes to
`augmented.rejected.parquet` with its reason, so every id in the augmented set is unique.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sws import ui
from sws.artifacts import (
    SCHEMAS,
    StageResult,
    read_table,
    rejected_path,
    run_stage,
    table_path,
    write_rejected,
    write_table,
)
from sws.config import PipelineConfig
from sws.funnel import funnel_row
from sws.near_duplicates import problem_key
from sws.stage import Stage

STEP = "mix"

AUGMENTED_COLUMNS = list(SCHEMAS["augmented"])


def synthetic_source(cfg: PipelineConfig) -> str:
    return f"syn/{cfg.roles.generator.model}"


def mix(problems: pl.DataFrame, filtered: pl.DataFrame, source: str) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return (augmented, rejected synthetic rows with `reject_reason`)."""
    seed = problems.select(AUGMENTED_COLUMNS)
    seen_texts = {problem_key(text) for text in seed["problem"]}
    seed_texts = set(seen_texts)
    seen_ids = set(seed["problem_id"])
    kept, rejected = [], []
    for row in filtered.iter_rows(named=True):
        text = problem_key(row["problem"])
        if text in seed_texts:
            rejected.append({**row, "reject_reason": "duplicate_of_seed"})
        elif text in seen_texts:
            rejected.append({**row, "reject_reason": "duplicate_synthetic"})
        elif row["syn_id"] in seen_ids:
            rejected.append({**row, "reject_reason": "duplicate_id"})
        else:
            seen_texts.add(text)
            seen_ids.add(row["syn_id"])
            kept.append({"problem_id": row["syn_id"], "problem": row["problem"], "answer": row["answer"],
                         "category": row["category"], "source": source})
    synthetic = pl.DataFrame(kept, schema=SCHEMAS["augmented"])
    return pl.concat([seed, synthetic]), pl.DataFrame(rejected, schema={**filtered.schema, "reject_reason": pl.Utf8})


def run(cfg: PipelineConfig, run_dir: Path, force: bool = False) -> StageResult:
    run_dir = Path(run_dir)
    source = synthetic_source(cfg)

    def body() -> StageResult:
        problems = read_table(run_dir, "problems")
        filtered = read_table(run_dir, "filtered")
        augmented, rejected = mix(problems, filtered, source)
        write_table(run_dir, "augmented", augmented)
        write_rejected(run_dir, "augmented", rejected)
        n_synthetic = augmented.height - problems.height
        ui.info(f"mix: {problems.height} seed + {n_synthetic} synthetic = {augmented.height} problems "
                f"({rejected.height} synthetic rejected as duplicates)")
        funnel = funnel_row(STEP, filtered.height, n_synthetic, rejected["reject_reason"])
        return StageResult(STEP, rows={"augmented": augmented.height, "augmented.rejected": rejected.height},
                           info={"seed": problems.height, "synthetic": n_synthetic, "funnel": funnel.as_info()})

    return run_stage(
        run_dir, STEP, config={"source": source},
        inputs=[table_path(run_dir, "problems"), table_path(run_dir, "filtered")],
        outputs=[table_path(run_dir, "augmented"), rejected_path(run_dir, "augmented")], body=body, force=force,
    )


DECLARED = (Stage(
    STEP, "Build augmented.parquet: the seed problems plus the synthetic problems that passed every filter.", run,
    reads=("problems", "filtered"), writes=("augmented",), funnel=True,
    example="sws mix --run runs/demo"),)
