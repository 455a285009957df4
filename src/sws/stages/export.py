"""`sws export verl`: a problem table as verl's RL dataset Parquet (DESIGN §3).

Each row: `data_source`, `prompt` (chat messages), `ability`, `reward_model = {style: "rule", ground_truth}`,
`extra_info = {index, problem_id, split, category, source}`. `data_source` is the row's `source`, so verl's
validation metrics break down by seed versus synthetic origin; sws's own reward function ignores it.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sws import ui
from sws.artifacts import StageResult, read_table, run_stage, table_path, write_parquet
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.policy import policy_prompt

EXPORTABLE_TABLES = ("augmented", "problems")

VERL_SCHEMA: dict[str, pl.DataType] = {
    "data_source": pl.Utf8,
    "prompt": pl.List(pl.Struct({"role": pl.Utf8, "content": pl.Utf8})),
    "ability": pl.Utf8,
    "reward_model": pl.Struct({"style": pl.Utf8, "ground_truth": pl.Utf8}),
    "extra_info": pl.Struct(
        {"index": pl.Int64, "problem_id": pl.Utf8, "split": pl.Utf8, "category": pl.Utf8, "source": pl.Utf8}
    ),
}


def default_export_path(run_dir: Path, table: str) -> Path:
    return Path(run_dir) / "verl" / f"{table}.parquet"


def chat_messages(problem: str, world: str) -> list[dict[str, str]]:
    """The policy's prompt as chat messages; a raw-text prompt becomes one user message."""
    fields = policy_prompt(problem, world)
    if "messages" in fields:
        return [dict(message) for message in fields["messages"]]
    return [{"role": "user", "content": fields["prompt"]}]


def verl_table(problems: pl.DataFrame, world: str, split: str) -> pl.DataFrame:
    """Convert rows with `problem_id, problem, answer, category, source` into verl's dataset layout."""
    rows = [
        {
            "data_source": row["source"],
            "prompt": chat_messages(row["problem"], world),
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": row["answer"]},
            "extra_info": {
                "index": index, "problem_id": row["problem_id"], "split": split,
                "category": row["category"], "source": row["source"],
            },
        }
        for index, row in enumerate(problems.iter_rows(named=True))
    ]
    return pl.DataFrame(rows, schema=VERL_SCHEMA)


def run(
    cfg: PipelineConfig,
    run_dir: Path,
    force: bool = False,
    table: str = "augmented",
    out: Path | None = None,
    split: str = "train",
) -> StageResult:
    run_dir = Path(run_dir)
    if table not in EXPORTABLE_TABLES:
        raise UserError(f"--table: unknown table '{table}'; use one of {', '.join(EXPORTABLE_TABLES)}")
    source = table_path(run_dir, table)
    out_path = Path(out) if out is not None else default_export_path(run_dir, table)

    def body() -> StageResult:
        exported = verl_table(read_table(run_dir, table), cfg.world, split)
        write_parquet(exported, out_path)
        ui.info(f"export: {exported.height} rows of {source.name} -> {out_path}")
        return StageResult("export", rows={out_path.name: exported.height}, info={"path": str(out_path)})

    return run_stage(
        run_dir, f"export-{table}", config={"world": cfg.world, "split": split, "out": str(out_path)},
        inputs=[source], outputs=[out_path], body=body, force=force,
    )
