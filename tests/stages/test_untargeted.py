from pathlib import Path

import polars as pl
import pytest
from _synthesis_run import fake_checkpoint, noisy_oracle_config, write_identified_run

from sws.config import EngineConfig
from sws.run_dir import RunDir
from sws.stages import untargeted
from sws.tables import read_table, table_path
from sws.worlds.arith.world import ORACLE


def test_random_weakness_marks_as_many_rolled_out_problems_as_are_weak_by_the_seed() -> None:
    weakness = pl.DataFrame({"problem_id": [f"p{index}" for index in range(40)], "n_record": [0] * 10 + [2] * 30,
                             "weak": [False] * 30 + [True] * 10})
    drawn = untargeted.random_weakness(weakness, 7)
    assert drawn["weak"].sum() == 10 and not drawn.filter(pl.col("n_record") == 0)["weak"].any()
    assert drawn.equals(untargeted.random_weakness(weakness, 7))
    assert not drawn["weak"].equals(untargeted.random_weakness(weakness, 8)["weak"])


@pytest.mark.slow
def test_untargeted_synthesis_runs_the_same_stages_on_random_seed_problems_in_a_folder_of_its_own(
        tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    problems = write_identified_run(run.root)
    fake_checkpoint(run.root, "initial")
    cfg = noisy_oracle_config(budget=24, untargeted_arm=True)
    cfg.roles.policy = EngineConfig(**ORACLE, options={"labeler_error": 0.5})
    cfg.filter.rollouts = 4

    untargeted.run(cfg, run.root)

    weak = set(read_table(run.root, "weakness").filter(pl.col("weak"))["problem_id"])
    control = run.untargeted
    drawn = set(read_table(control.root, "weakness").filter(pl.col("weak"))["problem_id"])
    assert len(drawn) == len(weak) and drawn != weak and drawn <= set(problems["problem_id"])
    # synthesis's input is the random draw, not the weak problems
    concepts = read_table(control.root, "concepts")
    assert set(concepts["problem_id"]) <= drawn and set(concepts["problem_id"]) - weak
    categories = read_table(control.root, "categories")
    assert categories["n_weak"].sum() == len(drawn)
    augmented = read_table(run.root, "untargeted/augmented")
    assert augmented.height == problems.height + read_table(control.root, "filtered").height > problems.height
    # the run's own synthesis tables are untouched, the caches are the run's, the policy is the run's
    assert not table_path(run.root, "concepts").exists() and not (control.root / "cache").exists()
    assert control.initial_checkpoint.resolve() == run.initial_checkpoint.resolve()
    assert (control.manifests / "label.json").is_file() and (control.manifests / "mix.json").is_file()
