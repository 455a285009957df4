"""`sws export verl`: a problem table as verl's RL dataset Parquet (layout: `sws.training.verl_dataset`)."""

from __future__ import annotations

from pathlib import Path

from sws import ui
from sws.artifacts import StageResult, read_table, run_stage, table_path, write_parquet
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.stage import Stage
from sws.training.verl_dataset import verl_table

EXPORTABLE_TABLES = ("augmented", "problems")


def default_export_path(run_dir: Path, table: str) -> Path:
    return Path(run_dir) / "verl" / f"{table}.parquet"


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


DECLARED = (Stage(
    "export", "Write a problem set as verl's RL dataset Parquet (prompt, reward_model, extra_info).", drive=run,
    reads=("augmented",), command="sws export verl", title="export verl"),)
