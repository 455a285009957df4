from pathlib import Path

import polars as pl
import pytest

from sws import runner
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.near_duplicates import problem_key
from sws.stages import eval as eval_stage
from sws.stages import oracle_family
from sws.tables import read_table, write_table
from sws.worlds.arith import generate_problems
from sws.worlds.arith.truth import family_of

WEAK_FAMILIES = {"add_carry_small", "sub_borrow_small"}


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A seed set of medium addition and subtraction problems, weak on two families."""
    arith = generate_problems(120, seed=4, categories=["addition", "subtraction"], levels=["medium"])
    problems = pl.DataFrame({
        "problem_id": [f"p{i}" for i in range(len(arith))], "problem": [p.problem for p in arith],
        "answer": [p.answer for p in arith], "category": [p.category for p in arith],
        "source": ["arith"] * len(arith), "family": [p.family for p in arith],
    })
    weak = [p.family in WEAK_FAMILIES for p in arith]
    write_table(tmp_path, "problems", problems)
    write_table(tmp_path, "weakness", pl.DataFrame({
        "problem_id": problems["problem_id"], "category": problems["category"], "accs": [[0.25, 0.125]] * len(arith),
        "n_record": [2] * len(arith), "max_acc": [0.25 if w else 0.875 for w in weak],
        "slope": [-0.125 if w else 0.0 for w in weak], "weak": weak,
    }))
    return tmp_path


def config(n: int | None = 30) -> PipelineConfig:
    cfg = PipelineConfig()
    cfg.oracle_family.arm = True
    cfg.oracle_family.n = n
    return cfg


def test_the_upper_bound_adds_fresh_problems_of_the_weak_families_the_smaller_dose_inside_the_larger(
        run_dir: Path) -> None:
    result = runner.run(oracle_family.DECLARED[0], config(), run_dir)
    seed = read_table(run_dir, "problems")
    small, large = (read_table(run_dir, table).filter(pl.col("source") == oracle_family.SOURCE)
                    for table in oracle_family.TABLES)
    assert (small.height, large.height) == (30, 90)
    assert result.info["added"] == dict(zip(oracle_family.TABLES, (30, 90), strict=True))
    assert set(small["problem_id"]) <= set(large["problem_id"])
    seed_keys = {problem_key(text) for text in seed["problem"]}
    assert not {problem_key(text) for text in large["problem"]} & seed_keys
    assert large["problem"].map_elements(problem_key, return_dtype=pl.Utf8).n_unique() == 90
    assert {family_of(text) for text in large["problem"]} <= {family_of(text) for text in
                                                              seed.filter(pl.col("problem_id").is_in(
                                                                  [f"p{i}" for i in range(120)]))["problem"]}
    weak_texts = seed.join(read_table(run_dir, "weakness").filter("weak"), on="problem_id")["problem"]
    assert {family_of(text) for text in large["problem"]} == {family_of(text) for text in weak_texts}


def test_the_held_out_sets_leave_out_every_problem_the_upper_bound_trains_on(run_dir: Path) -> None:
    runner.run(oracle_family.DECLARED[0], config(200), run_dir)
    problems, weakness = read_table(run_dir, "problems"), read_table(run_dir, "weakness")
    large = read_table(run_dir, "oracle_family_large_mix")
    training = pl.DataFrame({"key": [problem_key(text) for text in large["problem"]],
                             "table": ["oracle_family_large_mix"] * large.height, "problem": large["problem"]})
    cfg = config(200)
    cfg.eval.benchmarks = ["arith"]
    sets = eval_stage.evaluation_sets(cfg, run_dir / "pipeline.yaml", problems, weakness, training)
    held_out = [each for each in sets if each.held_out]
    assert {each.name for each in held_out} >= {"weak_like", "arith"}
    for each in held_out:
        assert not {problem_key(text) for text in each.problems["problem"]} & set(training["key"]), each.name


def test_without_a_dose_it_adds_as_many_as_the_band_kept(run_dir: Path) -> None:
    write_table(run_dir, "filtered", pl.DataFrame({
        "syn_id": [f"s{i}" for i in range(7)], "category": ["addition"] * 7, "problem": ["x"] * 7,
        "answer": ["1"] * 7, "n": [8] * 7, "n_correct": [4] * 7, "accuracy": [0.5] * 7, "round": [0] * 7}))
    runner.run(oracle_family.DECLARED[0], config(None), run_dir)
    assert read_table(run_dir, "oracle_family_mix").height == 120 + 7


def test_a_world_that_cannot_draw_family_problems_is_one_clear_error(run_dir: Path) -> None:
    cfg = config()
    cfg.world = "math"
    with pytest.raises(UserError, match="oracle_family.arm: false"):
        runner.run(oracle_family.DECLARED[0], cfg, run_dir)
    assert not (run_dir / "oracle_family_mix.parquet").exists()
