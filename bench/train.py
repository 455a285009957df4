"""Seconds per GRPO step through sws's trainer against bare `trl.GRPOTrainer` with the same settings.

Usage: `python bench/train.py [MODEL_DIR]`. Both train MODEL_DIR (default: the bootstrapped arith policy, built
once and cached, as `make demo` does) on the same seed problems
with the GRPOConfig sws builds from the default `train` settings, so batch, generations, completion length and
checkpointing are identical. The bare run's reward is a minimal boxed-integer check; the sws run adds grading
through `sws.grading`, the rollout log and the progress bar. Runs alternate (bare, sws, bare, sws, ...) in one
process so machine load affects both alike; the ratio is of the medians over rounds. Model loading and trainer
construction are outside both timings. Besides wall time per step it compares the median of TRL's own
per-step time (generation, reward, loss and backward), which is robust to bursts of load from other processes. Goal: overhead <= 5 %.
"""

from __future__ import annotations

import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import torch
from transformers.trainer_callback import PrinterCallback
from trl import GRPOTrainer

from sws import ui
from sws.config import TrainConfig
from sws.training import TrainJob, train
from sws.training.trl import grpo_config, grpo_dataset, load_tokenizer, training_curve
from sws.worlds.arith import generate_problems
from sws.worlds.arith.bootstrap import bootstrap_policy

STEPS = 30
ROUNDS = 3
_BOXED_INTEGER = re.compile(r"\\boxed\{(-?\d+)\}")


def seed_problems(n: int = 600) -> pl.DataFrame:
    problems = generate_problems(n, seed=0)
    return pl.DataFrame({
        "problem_id": [f"p{index}" for index in range(n)],
        "problem": [problem.problem for problem in problems],
        "answer": [problem.answer for problem in problems],
    })


def bare_reward(completions: list[str], answer: list[str], **_: object) -> list[float]:
    found = [_BOXED_INTEGER.search(text) for text in completions]
    return [float(match is not None and match.group(1) == gold) for match, gold in zip(found, answer, strict=True)]


def bare_run(job: TrainJob, cfg: TrainConfig) -> tuple[float, float]:
    """(wall seconds per step, median of TRL's per-step time) of bare GRPOTrainer on `job`."""
    trainer = GRPOTrainer(
        model=str(job.init_model), reward_funcs=[bare_reward], args=grpo_config(job, cfg),
        train_dataset=grpo_dataset(job.problems, job.world), processing_class=load_tokenizer(job.init_model),
    )
    trainer.remove_callback(PrinterCallback)  # sws prints nothing per step either
    started = time.perf_counter()
    trainer.train()
    wall = (time.perf_counter() - started) / job.steps
    return wall, float(training_curve(trainer.state.log_history)["seconds"].median())


def sws_run(job: TrainJob, cfg: TrainConfig) -> tuple[float, float]:
    """The same through `sws.training.train` (reward via sws.grading, rollout log, progress callback)."""
    outcome = train(job, cfg)
    return outcome.seconds_per_step, float(outcome.curve["seconds"].median())


def bench_job(kind: str, round_index: int, policy: Path, problems: pl.DataFrame, scratch: Path) -> TrainJob:
    out_dir = scratch / f"{kind}-{round_index}"
    return TrainJob(name=kind, problems=problems, init_model=policy, out_dir=out_dir, steps=STEPS, world="arith",
                    seed=round_index, identity=kind, config_file=out_dir / "config.yaml")


def main() -> None:
    torch.set_num_threads(1)
    ui.set_quiet(True)
    cfg = TrainConfig()
    policy = Path(sys.argv[1]) if len(sys.argv) > 1 else bootstrap_policy()
    problems = seed_problems()
    timings: dict[str, list[tuple[float, float]]] = {"bare": [], "sws": []}
    with tempfile.TemporaryDirectory() as scratch:
        for round_index in range(ROUNDS):
            for name, run in (("bare", bare_run), ("sws", sws_run)):
                timings[name].append(run(bench_job(name, round_index, policy, problems, Path(scratch)), cfg))
            print(f"round {round_index + 1}: " + ", ".join(
                f"{name} {rows[-1][0]:.3f} s/step wall, {rows[-1][1]:.3f} s median step" for name, rows in timings.items()
            ), file=sys.stderr)
    wall = {name: statistics.median(row[0] for row in rows) for name, rows in timings.items()}
    step = {name: statistics.median(row[1] for row in rows) for name, rows in timings.items()}
    print(f"GRPO step ({cfg.batch_size} problems x {cfg.num_generations} completions, {STEPS} steps x {ROUNDS} rounds): "
          f"median step bare TRL {step['bare']:.3f} s, through sws {step['sws']:.3f} s, "
          f"ratio {step['sws'] / step['bare']:.3f} (overhead {100 * (step['sws'] / step['bare'] - 1):+.1f} %); "
          f"wall per step ratio {wall['sws'] / wall['bare']:.3f}")


if __name__ == "__main__":
    main()
