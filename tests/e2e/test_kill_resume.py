"""Fault injection: every stage's command is SIGKILLed at random instants, then rerun; the run must end equal,
row for row, to a run that was never interrupted.

Each command runs in a child process forked from a server that has already imported sws (multiprocessing's
forkserver), so a kill lands in the stage's own work rather than in Python's start-up. Hypothesis draws the
kill schedule: for each command, the instants (as fractions of its uninterrupted duration) at which the
consecutive attempts are killed, before a last attempt runs to the end.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from forked_commands import finish, kill_after, tables
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.heavy]

KILLS_PER_COMMAND = 15
PIPELINE = {
    "seed": 0, "world": "arith",
    "arith": {"n_seed_problems": 48, "seed_levels": ["easy", "medium"], "n_eval_per_category": 3,
              "bootstrap_steps": 40},
    "roles": {
        "generator": {"engine": "oracle", "model": "arith-oracle",
                      "options": {"ill_posed": 0.1, "multi_part": 0.1, "answer_leak": 0.1}},
        "judges": [{"engine": "oracle", "model": "arith-oracle", "options": {"judge_error": 0.1}}],
        "labeler": {"engine": "oracle", "model": "arith-oracle", "options": {"labeler_error": 0.1}},
        "policy": {"engine": "hf", "model": "", "temperature": 1.0, "options": {"batch_size": 64}},
    },
    "identify": {"max_acc": 0.75, "max_slope": 1.0},
    "synthesize": {"budget": 24, "levels": ["easy", "medium"], "label_samples": 4,
                   "shard_size": 4, "adapt_rounds": 1, "adapt_harder": True},
    "filter": {"band": [0.0, 1.0], "rollouts": 2, "shard_size": 4},
    "train": {"initial_steps": 6, "augmented_steps": 4, "batch_size": 4, "num_generations": 2, "save_steps": 1},
    "eval": {"k": 1, "shard_size": 16},
}
COMMANDS = [
    ["prepare", "--input", "{seed}"],
    ["train", "initial"],
    ["identify"],
    ["synthesize", "--sub-steps", "extract"],
    ["synthesize", "--sub-steps", "combine"],
    ["synthesize", "--sub-steps", "generate"],
    ["synthesize", "--sub-steps", "rate"],
    ["synthesize", "--sub-steps", "label"],
    ["filter"],
    ["mix"],
    ["export", "verl"],
    ["train", "augmented"],
    ["train", "baseline"],
    ["eval"],
    ["report"],
]


def command_line(command: list[str], run_dir: Path, seed_file: Path, config: Path | None) -> list[str]:
    argv = [part.format(seed=seed_file) for part in command]
    return ["--quiet", *argv, "--run", str(run_dir), *(["--config", str(config)] if config else [])]


def prepare_run(tmp: Path) -> tuple[Path, Path]:
    from sws.worlds.arith.bootstrap import bootstrap_policy
    from sws.worlds.arith.seed_set import write_seed_set

    config = tmp / "kill.yaml"
    config.write_text(json.dumps(PIPELINE))
    seed_file = tmp / "seed.jsonl"
    write_seed_set(seed_file, PIPELINE["arith"]["n_seed_problems"], 0, levels=PIPELINE["arith"]["seed_levels"])
    bootstrap_policy(steps=PIPELINE["arith"]["bootstrap_steps"], seed=0)
    return config, seed_file


def results(run_dir: Path) -> dict[str, object]:
    """Every Parquet table and the summary of a run, keyed by its path in the run."""
    found: dict[str, object] = dict(tables(run_dir))
    summary = json.loads((run_dir / "summary.json").read_text())
    summary.pop("environment")
    found["summary.json"] = summary
    return found


@pytest.fixture(scope="module")
def reference(forkserver, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("reference")
    config, seed_file = prepare_run(tmp)
    run_dir = tmp / "run"
    durations = []
    for number, command in enumerate(COMMANDS):
        durations.append(finish(forkserver, command_line(command, run_dir, seed_file, config if number == 0 else None)))
    return config, seed_file, durations, results(run_dir)


# One schedule per run, never shrunk: each example costs minutes, and a failure names its command anyway.
@settings(max_examples=1, deadline=None, suppress_health_check=list(HealthCheck), phases=[Phase.generate])
@given(schedule=st.lists(st.lists(st.floats(0.05, 1.0), min_size=KILLS_PER_COMMAND, max_size=KILLS_PER_COMMAND),
                         min_size=len(COMMANDS), max_size=len(COMMANDS)))
def test_killed_commands_resume_to_the_uninterrupted_result(forkserver, reference, tmp_path_factory, schedule):
    config, seed_file, durations, expected = reference
    run_dir = tmp_path_factory.mktemp("killed") / "run"
    kills = 0
    for number, (command, duration, fractions) in enumerate(zip(COMMANDS, durations, schedule, strict=True)):
        argv = command_line(command, run_dir, seed_file, config if number == 0 else None)
        for fraction in fractions:
            kills += kill_after(forkserver, argv, fraction * duration)
        finish(forkserver, argv)
    got = results(run_dir)
    assert sorted(got) == sorted(expected)
    for name, table in expected.items():
        if isinstance(table, pl.DataFrame):
            assert got[name].equals(table), name
        else:
            assert got[name] == table, name
    print(f"{kills} kills over {len(COMMANDS)} commands; every artifact equals the uninterrupted run's")
    assert kills >= 0.8 * KILLS_PER_COMMAND * len(COMMANDS)
