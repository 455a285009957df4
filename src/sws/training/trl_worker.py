"""`python -m sws.training.trl_worker JOB_FILE`: one process of a TRL run on several GPUs, started by the
`launch.sh` that `sws.training.trl_launch` writes (under `accelerate launch`, one process per GPU)."""

from __future__ import annotations

import sys
from pathlib import Path

from sws.atomic_files import write_json
from sws.training.trl import run_training
from sws.training.trl_launch import log_history_file, read_job


def main(spec: Path) -> None:
    job, cfg = read_job(spec)
    log_history = run_training(job, cfg)
    if log_history is not None:
        write_json(log_history_file(job.out_dir), log_history)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
