"""Fault injection for `sws run --rounds 2`: round 2 is SIGKILLed at random instants and rerun; its tables and
the ledger must end equal, row for row, to a run that was never interrupted.

Both runs share round 1 (run once, with `--rounds 1`, and copied), and each continues it at the same path, since
a run's tables name their folder: the reference to its end, the other through a few kills (Hypothesis draws the
instants, as fractions of the reference's duration) before a last attempt runs to the end.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from forked_commands import finish, kill_after, tables
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.heavy]

KILLS = 4
PIPELINE = {
    "seed": 0, "world": "arith", "rounds": 2,
    "arith": {"n_seed_problems": 32, "seed_levels": ["easy", "medium"], "n_eval_per_category": 2,
              "bootstrap_steps": 40},
    "roles": {"policy": {"engine": "hf", "model": "", "temperature": 1.0, "options": {"batch_size": 64}}},
    "identify": {"max_acc": 0.75, "max_slope": 1.0},
    "synthesize": {"budget": 8, "levels": ["easy", "medium"], "label_samples": 2, "adapt_rounds": 0,
                   "shard_size": 4},
    "filter": {"band": [0.0, 1.0], "rollouts": 2, "shard_size": 4},
    "train": {"initial_steps": 2, "augmented_steps": 2, "batch_size": 4, "num_generations": 2, "save_steps": 1},
    "eval": {"k": 1, "weak_k": 2, "shard_size": 8},
}


def results(run_dir: Path) -> dict[str, object]:
    """The ledger, the per-round numbers and every table of round 2."""
    found = {name: table for name, table in tables(run_dir).items() if name in ("ledger.parquet",
                                                                                  "rounds_summary.parquet")}
    return {**found, **{f"rounds/2/{name}": table for name, table in tables(run_dir / "rounds" / "2").items()}}


@pytest.fixture(scope="module")
def round_2(forkserver, tmp_path_factory):
    """The pipeline, the run's path, round 1 alone (a copy), round 2's uninterrupted results and duration."""
    tmp = tmp_path_factory.mktemp("rounds")
    config, run_dir = tmp / "rounds.yaml", tmp / "run"
    config.write_text(json.dumps(PIPELINE))
    argv = ["--quiet", "run", str(config), "--run", str(run_dir)]
    finish(forkserver, [*argv, "--rounds", "1"])
    shutil.copytree(run_dir, tmp / "round-1", symlinks=True)
    duration = finish(forkserver, argv)
    expected = results(run_dir)
    shutil.rmtree(run_dir)
    return argv, run_dir, tmp / "round-1", duration, expected


# One schedule, never shrunk: each example costs minutes.
@settings(max_examples=1, deadline=None, suppress_health_check=list(HealthCheck), phases=[Phase.generate])
@given(fractions=st.lists(st.floats(0.1, 0.95), min_size=KILLS, max_size=KILLS))
def test_a_round_killed_at_random_instants_resumes_to_the_uninterrupted_result(forkserver, round_2, fractions):
    argv, run_dir, round_1, duration, expected = round_2
    shutil.copytree(round_1, run_dir, symlinks=True)
    kills = sum(kill_after(forkserver, argv, fraction * duration) for fraction in fractions)
    finish(forkserver, argv)
    got = results(run_dir)
    assert "ledger.parquet" in got and "rounds/2/weakness.parquet" in got
    assert sorted(got) == sorted(expected)
    for name, table in expected.items():
        assert got[name].equals(table), name
    print(f"{kills} kills in round 2 ({duration:.0f} s uninterrupted); the ledger and round 2's tables equal "
          "the uninterrupted run's")
    assert kills >= KILLS - 1
