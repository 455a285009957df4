"""`sws ingest`: another trainer's rollout log (verl dumps or SwS `acc_records.json`) as rollouts.parquet.

Reads the log named by `ingest.format` / `ingest.path`, `problems.parquet` and, when given, `ingest.seed_file`
(the file whose row order or `index` column the log's indices refer to); writes `rollouts.parquet`. Rows that
match no problem are an error, so identify never sees a partial log. See `sws.rollouts` for the formats.
"""

from __future__ import annotations

from pathlib import Path

from sws import ui
from sws.artifacts import StageResult, read_table, run_stage, table_path, write_table
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.rollouts import rollouts_from_acc_records, rollouts_from_verl_dumps, seed_positions
from sws.stage import Stage

STAGE = "ingest"
READERS = {"verl": rollouts_from_verl_dumps, "acc_records": rollouts_from_acc_records}


def run(cfg: PipelineConfig, run_dir: Path, force: bool = False) -> StageResult:
    run_dir = Path(run_dir)
    settings = cfg.ingest
    if settings.format is None or settings.path is None:
        raise UserError("ingest: no rollout log given; pass --verl-dumps DIR or --acc-records FILE "
                        "(config fields ingest.format and ingest.path)")
    log_path = Path(settings.path)
    seed_file = Path(settings.seed_file) if settings.seed_file else None
    problems_path = table_path(run_dir, "problems")

    def body() -> StageResult:
        problems = read_table(run_dir, "problems")
        index_ids = None if seed_file is None else seed_positions(seed_file, problems, cfg.prepare.problem_field)
        rollouts = READERS[settings.format](log_path, problems, index_ids)
        if rollouts.height == 0:  # an empty log must not replace a good one
            raise UserError(f"{log_path}: holds no graded rollout; pass the log of a run that trained")
        path = write_table(run_dir, "rollouts", rollouts)
        n_problems = rollouts["problem_id"].n_unique()
        ui.info(f"{STAGE}: {rollouts.height} rollout records of {n_problems} problems from {log_path} -> {path}")
        return StageResult(STAGE, rows={"rollouts": rollouts.height}, info={"n_problems": n_problems})

    return run_stage(
        run_dir, STAGE,
        config={"ingest": settings.model_dump(mode="json"), "problem_field": cfg.prepare.problem_field},
        inputs=[log_path, problems_path, *([seed_file] if seed_file else [])],
        outputs=[table_path(run_dir, "rollouts")], body=body, force=force,
    )


DECLARED = (Stage(
    STAGE, "Read another trainer's rollout log into rollouts.parquet, matching every row to a problem.", drive=run,
    reads=("problems",), writes=("rollouts",), section="ingest", command="sws ingest", in_run=False),)
