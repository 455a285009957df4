"""`sws export verl`: a problem table as verl's RL dataset Parquet (layout: `sws.training.verl_dataset`).

Each exportable table has its stage (`export-<table>`, its manifest's name); the command's options `--out` and
`--split` reach it as options, and the file it writes is its output."""

from __future__ import annotations

from pathlib import Path

from sws import runner, ui
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.manifests import StageResult
from sws.run_dir import RunDir
from sws.runner import StageContext, StageOutput
from sws.stage import Stage
from sws.training.verl_dataset import verl_table

EXPORTABLE_TABLES = ("augmented", "problems")


def default_export_path(run_dir: Path, table: str) -> Path:
    return Path(run_dir) / "verl" / f"{table}.parquet"


def run(cfg: PipelineConfig, run_dir: Path, force: bool = False, table: str = "augmented", out: Path | None = None,
        split: str = "train") -> StageResult:
    """Export `table` to `out` (default `<run>/verl/<table>.parquet`)."""
    if table not in EXPORTABLE_TABLES:
        raise UserError(f"--table: unknown table '{table}'; use one of {', '.join(EXPORTABLE_TABLES)}")
    out_path = Path(out) if out is not None else default_export_path(run_dir, table)
    return runner.run_stage(EXPORTS[table], cfg, run_dir, force, out=out_path, split=split)


def settings(cfg: PipelineConfig, options: dict) -> dict:
    return {"world": cfg.world, "split": options["split"], "out": str(options["out"])}


def out_file(cfg: PipelineConfig, run: RunDir, options: dict) -> list[Path]:
    return [options["out"]]


def export(context: StageContext) -> StageOutput:
    """The table's rows as verl dataset rows, into the `out` file."""
    [(name, table)] = context.tables.items()
    out_path = context.options["out"]
    exported = verl_table(table, context.cfg.world, context.options["split"])
    ui.info(f"export: {exported.height} rows of {context.source(name).name} -> {out_path}")
    return StageOutput(files={out_path: exported.write_parquet},
                       info={"path": str(out_path), "rows": exported.height})


EXPORTS = {table: Stage(f"export-{table}", f"Write {table}.parquet as verl's RL dataset Parquet.", export,
                        reads=(table,), settings=settings, output_files=out_file, in_run=False)
           for table in EXPORTABLE_TABLES}
STAGE = Stage(
    "export", "Write a problem set as verl's RL dataset Parquet (prompt, reward_model, extra_info).", drive=run,
    command="sws export verl", title="export verl")
DECLARED = (STAGE,)
