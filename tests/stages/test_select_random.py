from pathlib import Path

import polars as pl
import pytest
from test_select import banded_run

from sws import runner
from sws.config import PipelineConfig
from sws.stage import all_stages
from sws.stages import select, select_random
from sws.tables import read_table, rejected_path

MIX_RANDOM = next(stage for stage in select_random.DECLARED if stage.name == select_random.MIX_STEP)


def test_random_selection_draws_as_many_band_filtered_pool_problems_as_selection_took(tmp_path: Path) -> None:
    run_dir, cfg, problems = banded_run(tmp_path, arm=True, random_arm=True)
    runner.run(select.STAGE, cfg, run_dir)
    runner.run(select_random.DECLARED[0], cfg, run_dir)
    selected, drawn = read_table(run_dir, "selected"), read_table(run_dir, "random_selected")
    assert drawn.height == selected.height == 30
    assert not set(drawn["problem"]) & set(problems["problem"])  # no seed problem, respelled or not
    assert drawn["nearest_weak_id"].is_null().all()
    rejected = pl.read_parquet(rejected_path(run_dir, "random_selected"))
    assert {"duplicate_of_seed", "beyond_budget"} <= set(rejected["reject_reason"])
    out_of_band = rejected.filter(pl.col("reject_reason").str.starts_with("too "))
    assert out_of_band.height and ((out_of_band["accuracy"] < 0.25) | (out_of_band["accuracy"] > 0.75)).all()
    # the draw is the run's seed's, not the nearest to the weak problems
    assert set(drawn["problem_id"]) != set(selected["problem_id"])
    runner.run(MIX_RANDOM, cfg, run_dir)
    mixed = read_table(run_dir, "random_selected_mix")
    assert mixed.height == problems.height + 30
    assert mixed.slice(problems.height)["problem_id"].to_list() == drawn["problem_id"].to_list()


def test_the_random_order_is_the_seeds() -> None:
    pool = pl.DataFrame({"problem": [f"p{index}" for index in range(50)]})
    assert select_random.random_order(pool, 3).equals(select_random.random_order(pool, 3))
    assert not select_random.random_order(pool, 3).equals(select_random.random_order(pool, 4))


def test_the_random_arm_needs_the_selected_arm_and_runs_only_when_asked() -> None:
    with pytest.raises(ValueError, match="set select.arm: true"):
        PipelineConfig.model_validate({"select": {"random_arm": True}})
    on = PipelineConfig.model_validate({"select": {"arm": True, "random_arm": True}, "mix": {"sources": ["synthetic"]}})
    steps = {stage.name for stage in all_stages() if stage.in_run and stage.is_on(on)}
    assert {"select_random", "mix_random_selected", "train_selection"} <= steps
    off = PipelineConfig.model_validate({"select": {"arm": True}, "mix": {"sources": ["synthetic"]}})
    assert not {"select_random", "mix_random_selected"} & {
        stage.name for stage in all_stages() if stage.in_run and stage.is_on(off)}
