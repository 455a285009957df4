import polars as pl

from sws.config import PipelineConfig
from sws.near_duplicates import problem_key
from sws.world import get_world
from sws.worlds.arith import generate_problems, solve

ARITH = get_world("arith")


def seed_frame(problems) -> pl.DataFrame:
    return pl.DataFrame({"problem_id": [f"p{i}" for i in range(len(problems))],
                         "problem": [p.problem for p in problems], "answer": [p.answer for p in problems],
                         "category": [p.category for p in problems], "family": [p.family for p in problems]})


def test_heldout_problems_are_fresh_and_cover_every_seed_category() -> None:
    seed = seed_frame(generate_problems(60, seed=0, categories=["addition", "multi_step"]))
    cfg = PipelineConfig.model_validate({"seed": 1, "arith": {"n_eval_per_category": 20}})
    heldout = ARITH.heldout_set("arith", cfg, seed)
    assert heldout.height == 40
    assert set(heldout["category"]) == {"addition", "multi_step"}
    assert not set(heldout["problem"]) & set(seed["problem"])
    assert heldout["problem_id"].n_unique() == 40


def test_heldout_problems_replace_training_problems_and_keep_their_number() -> None:
    seed = seed_frame(generate_problems(30, seed=0, categories=["addition"]))
    cfg = PipelineConfig.model_validate({"seed": 1, "arith": {"n_eval_per_category": 20}})
    first = ARITH.heldout_set("arith", cfg, seed)

    trained_on = {problem_key(text) for text in first["problem"][:5]}
    again = ARITH.heldout_set("arith", cfg, seed, trained_on)

    assert again.height == 20 and not {problem_key(text) for text in again["problem"]} & trained_on
    assert set(first["problem"][5:]) <= set(again["problem"])


def test_a_set_the_world_does_not_have_is_none() -> None:
    assert ARITH.heldout_set("math500", PipelineConfig(), seed_frame(generate_problems(6, seed=0))) is None


def test_fresh_problems_of_the_weak_families_are_new_and_correctly_answered() -> None:
    problems = seed_frame(generate_problems(40, seed=3, categories=["multi_step"]))
    weakness = pl.DataFrame({"problem_id": problems["problem_id"], "weak": [True] * 40})
    cfg = PipelineConfig.model_validate({"seed": 5, "arith": {"n_weak_like": 100}})

    like = ARITH.weak_like_set(cfg, problems, weakness, set())

    assert like.height == 100 and like["problem"].n_unique() == 100
    assert not set(like["problem"]) & set(problems["problem"])
    assert all(solve(text).answer == answer for text, answer in like.select("problem", "answer").iter_rows())


def test_fresh_problems_leave_out_every_problem_given_to_exclude() -> None:
    problems = seed_frame(generate_problems(10, seed=3, categories=["addition"], levels=["easy"]))
    weakness = pl.DataFrame({"problem_id": problems["problem_id"], "weak": [True] * 10})
    cfg = PipelineConfig.model_validate({"seed": 5, "arith": {"n_weak_like": 20}})
    first = ARITH.weak_like_set(cfg, problems, weakness, set())

    excluded = {problem_key(text) for text in first["problem"][:10]}
    again = ARITH.weak_like_set(cfg, problems, weakness, excluded)

    assert again.height == 20 and not {problem_key(text) for text in again["problem"]} & excluded


def test_a_family_that_runs_out_of_fresh_problems_stops_giving_them() -> None:
    problems = seed_frame(generate_problems(4, seed=3, categories=["addition"], levels=["easy"]))
    weakness = pl.DataFrame({"problem_id": problems["problem_id"], "weak": [True] * 4})
    cfg = PipelineConfig.model_validate({"seed": 5, "arith": {"n_weak_like": 5000}})

    like = ARITH.weak_like_set(cfg, problems, weakness, set())

    # one-digit additions: 81 problems in all, less the seed problems of that family
    assert 0 < like.height <= 81 and like["problem"].n_unique() == like.height


def test_without_families_there_are_no_fresh_problems_like_the_weak_ones() -> None:
    problems = seed_frame(generate_problems(4, seed=3)).drop("family")
    weakness = pl.DataFrame({"problem_id": problems["problem_id"], "weak": [True] * 4})
    assert ARITH.weak_like_set(PipelineConfig(), problems, weakness, set()) is None


def test_the_policy_reads_the_raw_problem_text() -> None:
    assert ARITH.policy_prompt("Compute 2+3.") == {"prompt": "Compute 2+3.\n"}


def test_the_oracle_fills_every_teacher_role_a_pipeline_leaves_out() -> None:
    cfg = PipelineConfig.model_validate({"roles": {"labeler": {"engine": "openai", "model": "m"}}})
    assert cfg.roles.generator.engine == "oracle" and [judge.engine for judge in cfg.roles.judges] == ["oracle"]
    assert cfg.roles.labeler.engine == "openai"
