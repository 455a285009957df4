"""`sws ingest`: another trainer's rollout log (verl dumps or SwS `acc_records.json`) as rollouts.parquet.

Reads the log named by `ingest.format` / `ingest.path`, `problems.parquet` and, when given, `ingest.seed_file`
(the file whose row order or `index` column the log's indices refer to); writes `rollouts.parquet`. Rows that
match no problem are an error, so identify never sees a partial log. See `sws.rollouts` for the formats.
"""

from __future__ import annotations

from pathlib import Path

from sws import ui
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.rollouts import rollouts_from_acc_records, rollouts_from_verl_dumps, seed_positions
from sws.run_dir import RunDir
from sws.runner import StageContext, StageOutput
from sws.stage import Stage

STEP = "ingest"
READERS = {"verl": rollouts_from_verl_dumps, "acc_records": rollouts_from_acc_records}


def log_files(cfg: PipelineConfig, run: RunDir) -> list[Path]:
    """The rollout log and, when given, the seed file its indices refer to."""
    chosen = cfg.ingest
    if chosen.format is None or chosen.path is None:
        raise UserError("ingest: no rollout log given; pass --verl-dumps DIR or --acc-records FILE "
                        "(config fields ingest.format and ingest.path)")
    return [Path(chosen.path), *([Path(chosen.seed_file)] if chosen.seed_file else [])]


def settings(cfg: PipelineConfig, options: dict) -> dict:
    return {"ingest": cfg.ingest.model_dump(mode="json"), "problem_field": cfg.prepare.problem_field}


def ingest(context: StageContext) -> StageOutput:
    """The log's graded rollouts, each matched to a problem."""
    cfg = context.cfg
    chosen = cfg.ingest
    log_path = Path(chosen.path)
    problems = context.table("problems")
    index_ids = (None if chosen.seed_file is None
                 else seed_positions(Path(chosen.seed_file), problems, cfg.prepare.problem_field))
    rollouts = READERS[chosen.format](log_path, problems, index_ids)
    if rollouts.height == 0:  # an empty log must not replace a good one
        raise UserError(f"{log_path}: holds no graded rollout; pass the log of a run that trained")
    n_problems = rollouts["problem_id"].n_unique()
    ui.info(f"{STEP}: {rollouts.height} rollout records of {n_problems} problems from {log_path} -> rollouts.parquet")
    return StageOutput(tables={"rollouts": rollouts}, info={"n_problems": n_problems})


STAGE = Stage(
    STEP, "Read another trainer's rollout log into rollouts.parquet, matching every row to a problem.", ingest,
    reads=("problems",), writes=("rollouts",), settings=settings, input_files=log_files, section="ingest",
    command="sws ingest", in_run=False)
DECLARED = (STAGE,)
