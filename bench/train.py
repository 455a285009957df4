"""Seconds per GRPO step through sws's trainer against bare `trl.GRPOTrainer` with the same settings.

Usage: `python bench/train.py [MODEL_DIR]`. Both train MODEL_DIR (default: the bootstrapped arith policy, built
once and cached, as `make demo` does) on the same seed problems
with the GRPOConfig sws builds from the default `train` settings, so batch, generations, completion length and
checkpointing are identical. The bare run's reward is a minimal boxed-integer check; the sws run adds grading
through `sws.grading`, the rollout log and the progress bar. Runs alternate (bare, sws, bare, sws, ...) in one
process so machine load affects both alike; the ratio is of the medians over rounds. Model loading and trainer
construction are outside both timings. Goal: overhead <= 5 %.
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
from sws.training.trl import grpo_config, grpo_dataset, load_tokenizer
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


def bare_seconds_per_step(job: TrainJob, cfg: TrainConfig) -> float:
    trainer = GRPOTrainer(
        model=str(job.init_model), reward_funcs=[bare_reward], args=grpo_config(job, cfg),
        train_dataset=grpo_dataset(job.problems, job.world), processing_class=load_tokenizer(job.init_model),
    )
    trainer.remove_callback(PrinterCallback)  # sws prints nothing per step either
    started = time.perf_counter()
    trainer.train()
    return (time.perf_counter() - started) / job.steps


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
    bare, through_sws = [], []
    with tempfile.TemporaryDirectory() as scratch:
        for round_index in range(ROUNDS):
            bare.append(bare_seconds_per_step(bench_job("bare", round_index, policy, problems, Path(scratch)), cfg))
            outcome = train(bench_job("sws", round_index, policy, problems, Path(scratch)), cfg)
            through_sws.append(outcome.seconds_per_step)
            print(f"round {round_index + 1}: bare {bare[-1]:.3f} s/step, sws {through_sws[-1]:.3f} s/step",
                  file=sys.stderr)
    ratio = statistics.median(through_sws) / statistics.median(bare)
    print(f"GRPO step ({cfg.batch_size} problems x {cfg.num_generations} completions, {STEPS} steps x {ROUNDS} "
          f"rounds): bare TRL {statistics.median(bare):.3f} s/step, through sws "
          f"{statistics.median(through_sws):.3f} s/step, ratio {ratio:.3f} (overhead {100 * (ratio - 1):+.1f} %)")


if __name__ == "__main__":
    main()
