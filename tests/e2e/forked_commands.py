"""sws commands run in children of a forkserver that has already imported sws, so that a SIGKILL lands in the
command's own work rather than in Python's start-up; and the tables of a run, to compare a killed run with one
that was never interrupted."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from pathlib import Path

import polars as pl

# Only results are compared: caches, logs, checkpoints and timings differ by construction (the executors' shards
# are named by what was asked, and a policy by its folder in this run).
SKIPPED_PARTS = {"cache", "manifests", "plots", "shards"}
TIMING_COLUMNS = ["seconds"]  # a training curve's wall time per step


def forkserver_context():
    os.environ.update(OMP_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false", HF_HUB_OFFLINE="1")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["sws.cli", "sws.pipeline", "sws.training.trl", "sws.engines.hf"])
    return context


def invoke(argv: list[str]) -> None:
    from sws.cli import app

    sys.argv = ["sws", *argv]
    app(argv, prog_name="sws")


def start(context, argv: list[str]) -> multiprocessing.Process:
    process = context.Process(target=invoke, args=(argv,))
    process.start()
    return process


def finish(context, argv: list[str]) -> float:
    """Run `argv` to its end; the seconds it took."""
    started = time.perf_counter()
    process = start(context, argv)
    process.join(600)
    assert process.exitcode == 0, f"sws {' '.join(argv)} exited {process.exitcode}"
    return time.perf_counter() - started


def kill_after(context, argv: list[str], delay: float) -> bool:
    """Run `argv`, SIGKILL it after `delay` seconds; False when it finished before the kill."""
    process = start(context, argv)
    process.join(delay)
    if process.exitcode is not None:
        assert process.exitcode == 0, f"sws {' '.join(argv)} exited {process.exitcode}"
        return False
    os.kill(process.pid, signal.SIGKILL)
    process.join()
    return True


def tables(folder: Path) -> dict[str, pl.DataFrame]:
    """Every Parquet table under `folder` but caches, trainers' checkpoints and rollout shards, keyed by its path
    in `folder`, without timing columns."""
    found: dict[str, pl.DataFrame] = {}
    for path in sorted(folder.rglob("*.parquet")):
        relative = path.relative_to(folder)
        if relative.parts[0] in SKIPPED_PARTS or any(part.startswith("checkpoint-") for part in relative.parts):
            continue
        if relative.parts[0] == "train" and relative.parts[-2] == "rollouts":  # the trainer's own shards
            continue
        found[str(relative)] = pl.read_parquet(path).drop(TIMING_COLUMNS, strict=False)
    return found
