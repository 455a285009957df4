from __future__ import annotations

from collections import Counter
from pathlib import Path

import polars as pl
import pytest
from _synthesis_run import use_hashed_embeddings, write_identified_run

from sws import runner
from sws.concept_sampling import SampledSet
from sws.config import PipelineConfig
from sws.embeddings import cache_path
from sws.errors import UserError
from sws.stages import combine
from sws.tables import read_table, table_path, write_table


def write_concepts(run_dir: Path, rows: list[tuple[str, str, list[str]]]) -> None:
    write_table(run_dir, "concepts", pl.DataFrame(
        {"problem_id": [r[0] for r in rows], "category": [r[1] for r in rows], "concepts": [r[2] for r in rows]},
        schema={"problem_id": pl.Utf8, "category": pl.Utf8, "concepts": pl.List(pl.Utf8)},
    ))


def write_categories(run_dir: Path, shares: dict[str, float]) -> None:
    write_table(run_dir, "categories", pl.DataFrame({
        "category": list(shares), "n_problems": [10] * len(shares), "n_weak": [int(10 * s) for s in shares.values()],
        "fail_ratio": list(shares.values()), "share": list(shares.values()),
    }))


def many_concepts(prefix: str, n_problems: int = 30) -> list[tuple[str, str, list[str]]]:
    return [(f"{prefix}{i}", prefix, [f"{prefix} concept {(i + j) % 12}" for j in range(4)]) for i in range(n_problems)]


def test_budget_is_split_by_share_over_categories_with_concepts(tmp_path: Path, monkeypatch) -> None:
    use_hashed_embeddings(monkeypatch)
    write_concepts(tmp_path, many_concepts("algebra") + many_concepts("geometry"))
    # "counting" has a share but no weak problem made it through extraction; "number theory" has share 0
    write_categories(tmp_path, {"algebra": 0.5, "geometry": 0.25, "counting": 0.25, "number theory": 0.0})
    config = PipelineConfig()
    config.synthesize.budget = 31
    config.synthesize.set_size = 3
    result = runner.run(combine.STAGE, config, tmp_path)
    sets = read_table(tmp_path, "concept_sets")
    per_category = Counter(sets["category"].to_list())
    assert per_category == {"algebra": 21, "geometry": 10}  # 31 * 2/3 = 20.67 -> 21, 31 * 1/3 = 10.33 -> 10
    assert result.info["funnel"] == {"step": "combine", "in": 31, "kept": 31, "rejected": {}}
    assert sets["set_id"].n_unique() == 31
    # repeated draws are requests of their own: each repeat of a set is its next instance
    keys = {(row["category"], frozenset(row["concepts"]), row["level"], row["instance"])
            for row in sets.iter_rows(named=True)}
    assert len(keys) == 31
    assert all(len(set(listed)) == 3 for listed in sets["concepts"].to_list())
    assert set(sets["level"]) <= {"easy", "medium", "hard"}
    assert cache_path(tmp_path, config.roles.embedder.model).exists()


def one_large_category(run_dir: Path, monkeypatch, budget: int) -> PipelineConfig:
    """One category of 30 weak problems over 12 concepts, and a budget of `budget` sets."""
    use_hashed_embeddings(monkeypatch)
    write_concepts(run_dir, many_concepts("algebra"))
    write_categories(run_dir, {"algebra": 1.0})
    config = PipelineConfig()
    config.synthesize.budget = budget
    return config


def test_same_seed_same_sets_other_seed_other_sets(tmp_path: Path, monkeypatch) -> None:
    config = one_large_category(tmp_path, monkeypatch, 12)
    runner.run(combine.STAGE, config, tmp_path)
    first = read_table(tmp_path, "concept_sets")
    runner.run(combine.STAGE, config, tmp_path, force=True)
    assert read_table(tmp_path, "concept_sets").equals(first)
    config.seed = 1
    runner.run(combine.STAGE, config, tmp_path)
    assert not read_table(tmp_path, "concept_sets").equals(first)


def three_concept_category(run_dir: Path, monkeypatch) -> PipelineConfig:
    """One category with concepts a, b, c: three distinct 2-concept sets, and a budget of 10 for them."""
    use_hashed_embeddings(monkeypatch)
    write_concepts(run_dir, [("p1", "tiny", ["a", "b", "c"])])
    write_categories(run_dir, {"tiny": 1.0})
    config = PipelineConfig()
    config.synthesize.budget = 10
    config.synthesize.set_size = 2
    config.synthesize.levels = ["easy"]
    config.synthesize.sampling = "distinct"
    return config


def test_without_filling_the_shortfall_of_distinct_sets_is_counted(tmp_path: Path, monkeypatch) -> None:
    config = three_concept_category(tmp_path, monkeypatch)
    config.synthesize.fill_budget = False
    result = runner.run(combine.STAGE, config, tmp_path)
    sets = read_table(tmp_path, "concept_sets")
    assert sets.height == 3  # {a,b} {a,c} {b,c}
    assert set(sets["instance"]) == {0}
    assert result.info["funnel"]["rejected"] == {"duplicate_set": 7}
    assert result.info["spending"] == {"tiny": {"budget": 10, "set_size": 2, "distinct": 3, "level_filled": 0,
                                                "instance_filled": 0}}


def test_no_concepts_gives_empty_sets(tmp_path: Path, monkeypatch) -> None:
    use_hashed_embeddings(monkeypatch)
    write_concepts(tmp_path, [])
    write_categories(tmp_path, {"algebra": 1.0})
    result = runner.run(combine.STAGE, PipelineConfig(), tmp_path)
    assert read_table(tmp_path, "concept_sets").height == 0
    assert result.info["funnel"]["kept"] == 0


def test_category_unknown_to_categories_is_a_user_error(tmp_path: Path, monkeypatch) -> None:
    use_hashed_embeddings(monkeypatch)
    write_concepts(tmp_path, many_concepts("algebra"))
    write_categories(tmp_path, {"geometry": 1.0})
    with pytest.raises(UserError, match="no row for category 'algebra'"):
        runner.run(combine.STAGE, PipelineConfig(), tmp_path)
    assert not table_path(tmp_path, "concept_sets").exists()


def test_missing_concepts_names_the_command(tmp_path: Path) -> None:
    write_identified_run(tmp_path)
    with pytest.raises(UserError, match="sws synthesize --sub-steps extract"):
        runner.run(combine.STAGE, PipelineConfig(), tmp_path)


@pytest.mark.slow
def test_real_embeddings_on_oracle_concepts(tmp_path: Path) -> None:
    from sws.stages import extract

    write_identified_run(tmp_path)
    config = PipelineConfig()
    config.synthesize.budget = 30
    config.synthesize.set_size = 3
    runner.run(extract.STAGE, config, tmp_path)
    runner.run(combine.STAGE, config, tmp_path)
    sets = read_table(tmp_path, "concept_sets")
    listed = read_table(tmp_path, "concepts")
    assert sets.height == 30
    for category, drawn in zip(sets["category"], sets["concepts"].to_list(), strict=True):
        vocabulary = set(listed.filter(pl.col("category") == category)["concepts"].explode())
        assert set(drawn) <= vocabulary


def test_a_small_category_fills_its_quota_with_other_levels_then_new_instances(tmp_path: Path, monkeypatch) -> None:
    config = three_concept_category(tmp_path, monkeypatch)
    config.synthesize.levels = ["easy", "medium"]
    config.synthesize.budget = 15
    result = runner.run(combine.STAGE, config, tmp_path)
    sets = read_table(tmp_path, "concept_sets")
    assert sets.height == 15 and sets["set_id"].n_unique() == 15
    # three concept sets at two levels: six distinct requests, each asked for in full before any repeats
    requests = Counter((frozenset(row["concepts"]), row["level"]) for row in sets.iter_rows(named=True))
    assert len(requests) == 6 and set(requests.values()) == {2, 3}
    first_instances = sets.filter(pl.col("instance") == 0)
    assert first_instances.height == 6
    assert sets.filter(pl.col("instance") > 0)["instance"].to_list() == [1] * 6 + [2] * 3
    spent = result.info["spending"]["tiny"]
    assert spent["budget"] == 15
    assert spent["distinct"] + spent["level_filled"] == 6
    assert spent["instance_filled"] == 9
    assert result.info["funnel"] == {"step": "combine", "in": 15, "kept": 15, "rejected": {}}


def test_sets_drawn_at_some_levels_are_filled_at_the_others_before_any_instance() -> None:
    drawn = [SampledSet(("a", "b"), "easy"), SampledSet(("a", "c"), "easy"), SampledSet(("b", "c"), "medium")]
    planned = combine.fill_quota(drawn, 8, ["easy", "medium"])
    assert [(plan.drawn, plan.instance, plan.fill) for plan in planned] == [
        *((set_, 0, "distinct") for set_ in drawn),
        (SampledSet(("b", "c"), "easy"), 0, "level"),
        (SampledSet(("a", "b"), "medium"), 0, "level"), (SampledSet(("a", "c"), "medium"), 0, "level"),
        (drawn[0], 1, "instance"), (drawn[1], 1, "instance"),
    ]
    assert combine.fill_quota(drawn, 2, ["easy", "medium"]) == [combine.PlannedSet(d, 0, "distinct") for d in drawn[:2]]
    assert combine.fill_quota([], 5, ["easy"]) == []


def test_a_category_with_enough_distinct_sets_is_not_filled(tmp_path: Path, monkeypatch) -> None:
    config = one_large_category(tmp_path, monkeypatch, 20)
    config.synthesize.sampling = "distinct"
    result = runner.run(combine.STAGE, config, tmp_path)
    assert result.info["spending"]["algebra"] == {"budget": 20, "set_size": 4, "distinct": 20, "level_filled": 0,
                                                  "instance_filled": 0}
    assert set(read_table(tmp_path, "concept_sets")["instance"]) == {0}


def test_draws_ask_for_a_repeated_set_again_as_its_next_variant(tmp_path: Path, monkeypatch) -> None:
    config = three_concept_category(tmp_path, monkeypatch)
    config.synthesize.sampling = "draws"
    result = runner.run(combine.STAGE, config, tmp_path)
    sets = read_table(tmp_path, "concept_sets")
    assert sets.height == 10 and sets["set_id"].n_unique() == 10  # three distinct sets, ten requests
    for concepts in {frozenset(listed) for listed in sets["concepts"].to_list()}:
        instances = [row["instance"] for row in sets.iter_rows(named=True) if frozenset(row["concepts"]) == concepts]
        assert instances == list(range(len(instances)))
    assert "duplicate_set" not in result.info["funnel"]["rejected"]


def test_set_size_defaults_to_the_median_length_of_the_weak_problems_concept_lists(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    use_hashed_embeddings(monkeypatch)
    lists = [["a", "b"], ["a", "c", "d"], ["b", "c", "e"], ["c", "d", "e", "f"], ["a", "f", "g"]]
    write_concepts(tmp_path, [(f"p{i}", "tiny", listed) for i, listed in enumerate(lists)])
    write_categories(tmp_path, {"tiny": 1.0})
    config = PipelineConfig()
    config.synthesize.budget = 12
    result = runner.run(combine.STAGE, config, tmp_path)
    assert result.info["spending"]["tiny"]["set_size"] == 3
    assert {len(listed) for listed in read_table(tmp_path, "concept_sets")["concepts"].to_list()} == {3}


def test_request_shares_count_sets_inside_one_weak_list_and_sets_the_category_can_show() -> None:
    shares = combine.request_shares([("a", "b"), ("a", "c"), ("b", "d")], [["a", "b", "x"], ["a", "c"], ["d"]],
                                    lambda concepts: set(concepts) <= {"a", "b", "c"})
    assert shares == {"sets": 3, "within_one_weak_problem": pytest.approx(2 / 3), "showable": pytest.approx(2 / 3)}
    assert combine.request_shares([("a",)], [["a"]], lambda concepts: None)["showable"] is None
