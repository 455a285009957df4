import json
from pathlib import Path

import polars as pl
import pytest
from _synthesis_run import write_identified_run
from typer.testing import CliRunner

from sws import runner
from sws.budget import largest_remainder
from sws.cli import app
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.run_dir import RunDir
from sws.stage import all_stages
from sws.stages import mix
from sws.stages import select as stage
from sws.tables import read_table, rejected_path, table_path, write_table
from sws.world import get_world
from sws.worlds.arith import generate_problems

HOSTILE_MARKS = ("\u202e", "\x1b[2J", "\x00")


def write_pool(path: Path, seed_problems: pl.DataFrame, reference: Path) -> Path:
    fresh = generate_problems(150, seed=11)
    rows = [{"problem": p.problem, "answer": p.answer, "category": p.category} for p in fresh]
    rows += [{"problem": text.upper(), "answer": answer, "category": category}  # the seed set, respelled
             for text, answer, category in seed_problems.select("problem", "answer", "category").head(5).iter_rows()]
    benchmark = generate_problems(3, seed=99)
    reference.write_text("".join(json.dumps({"problem": p.problem}) + "\n" for p in benchmark))
    rows += [{"problem": p.problem, "answer": p.answer, "category": p.category} for p in benchmark]
    rows += [{"problem": mark + p.problem, "answer": p.answer, "category": p.category}  # hostile characters
             for mark, p in zip(HOSTILE_MARKS, generate_problems(len(HOSTILE_MARKS), seed=12), strict=True)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


@pytest.fixture
def selected_run(tmp_path: Path) -> tuple[Path, PipelineConfig, pl.DataFrame]:
    run_dir = tmp_path / "run"
    problems = write_identified_run(run_dir)
    pool = write_pool(tmp_path / "pool.jsonl", problems, tmp_path / "benchmark.jsonl")
    cfg = PipelineConfig.model_validate({"select": {"pool": str(pool), "budget": 30, "band": False},
                                         "synthesize": {"reference_files": [str(tmp_path / "benchmark.jsonl")]}})
    runner.run(stage.STAGE, cfg, run_dir)
    return run_dir, cfg, problems


def test_select_takes_exactly_the_budget_split_by_fail_ratio(selected_run) -> None:
    run_dir, _, _ = selected_run
    selected = read_table(run_dir, "selected")
    categories = read_table(run_dir, "categories")
    shares = {category: share for category, share in categories.select("category", "share").iter_rows() if share}
    assert selected.height == 30
    assert dict(selected["category"].value_counts().iter_rows()) == {
        category: count for category, count in largest_remainder(shares, 30).items() if count}
    assert selected["problem_id"].n_unique() == 30 and set(selected["source"]) == {"sel/pool"}


def test_no_seed_or_benchmark_duplicate_is_selected(selected_run) -> None:
    run_dir, _, problems = selected_run
    selected = read_table(run_dir, "selected")
    keys = {text.casefold() for text in problems["problem"]} | {
        json.loads(line)["problem"].casefold() for line in (run_dir.parent / "benchmark.jsonl").read_text().splitlines()}
    assert not {text.casefold() for text in selected["problem"]} & keys
    reasons = set(pl.read_parquet(rejected_path(run_dir, "selected"))["reject_reason"])
    assert {"duplicate_of_seed", "duplicate_of_reference", "beyond_budget"} <= reasons


def test_pool_problems_with_control_or_bidi_characters_are_never_selected(selected_run) -> None:
    run_dir, _, _ = selected_run
    rejected = pl.read_parquet(rejected_path(run_dir, "selected"))
    assert rejected.filter(pl.col("reject_reason") == "control_characters").height == len(HOSTILE_MARKS)
    assert not any(mark in text for text in read_table(run_dir, "selected")["problem"] for mark in HOSTILE_MARKS)


def test_the_nearest_come_first_and_each_is_near_a_weak_problem_of_its_category(selected_run) -> None:
    run_dir, _, problems = selected_run
    selected = read_table(run_dir, "selected")
    category_of = dict(problems.select("problem_id", "category").iter_rows())
    assert all(category_of[weak_id] == category
               for weak_id, category in selected.select("nearest_weak_id", "category").iter_rows())
    beyond = pl.read_parquet(rejected_path(run_dir, "selected")).filter(pl.col("reject_reason") == "beyond_budget")
    for category in selected["category"].unique():
        last_taken = selected.filter(pl.col("category") == category)["distance"].max()
        passed_over = beyond.filter(pl.col("category") == category)["distance"]
        assert passed_over.is_empty() or passed_over.min() >= last_taken


def test_mix_adds_the_selected_problems_when_they_are_asked_for(selected_run) -> None:
    run_dir, cfg, problems = selected_run
    write_table(run_dir, "filtered", pl.DataFrame(schema={
        "syn_id": pl.Utf8, "category": pl.Utf8, "problem": pl.Utf8, "answer": pl.Utf8, "n": pl.Int64,
        "n_correct": pl.Int64, "accuracy": pl.Float64, "round": pl.Int64}))
    runner.run(mix.STAGE, cfg, run_dir)
    assert read_table(run_dir, "augmented").height == problems.height + 30
    only_synthetic = cfg.model_copy(update={"mix": cfg.mix.model_copy(update={"sources": ["synthetic"]})})
    runner.run(mix.STAGE, only_synthetic, run_dir)
    assert read_table(run_dir, "augmented").height == problems.height


def test_the_command_comes_from_the_declaration_and_a_missing_pool_is_one_line(tmp_path: Path) -> None:
    write_identified_run(tmp_path)
    result = CliRunner().invoke(app, ["select", "--run", str(tmp_path), "--pool", str(tmp_path / "none.jsonl")])
    assert result.exit_code == 2 and "none.jsonl: file not found (select.pool)" in result.output
    with pytest.raises(UserError, match="select.pool: no pool given, and world 'math' draws none"):
        runner.run(stage.STAGE, PipelineConfig(world="math"), tmp_path)


def test_without_a_pool_the_arith_world_draws_one_and_selection_takes_as_many_as_the_filter_kept(
        tmp_path: Path) -> None:
    problems = write_identified_run(tmp_path)
    kept = generate_problems(17, seed=5)
    write_table(tmp_path, "filtered", pl.DataFrame({
        "syn_id": [f"syn-{index}" for index in range(17)], "category": [p.category for p in kept],
        "problem": [p.problem for p in kept], "answer": [p.answer for p in kept], "n": [4] * 17,
        "n_correct": [2] * 17, "accuracy": [0.5] * 17, "round": [0] * 17}))
    cfg = PipelineConfig.model_validate({"arith": {"n_pool_problems": 300, "n_eval_per_category": 5},
                                         "select": {"band": False}})

    result = runner.run(stage.STAGE, cfg, tmp_path)

    pool = pl.read_ndjson(RunDir(tmp_path).pool_file("arith"))
    assert pool.height == 300 and not set(pool["problem"]) & set(problems["problem"])
    held_out = get_world("arith").heldout_set("arith", cfg, problems)
    assert not set(pool["problem"]) & set(held_out["problem"])
    selected = read_table(tmp_path, "selected")
    assert selected.height == 17 and result.info["budget"] == 17 and set(selected["source"]) == {"sel/arith"}
    assert set(selected["problem"]) <= set(pool["problem"])


def test_the_selected_arm_trains_on_seed_and_selected_only(selected_run) -> None:
    run_dir, cfg, problems = selected_run
    arm = PipelineConfig.model_validate({**cfg.model_dump(mode="json"), "select": {
        **cfg.select.model_dump(mode="json"), "arm": True}, "mix": {"sources": ["synthetic"]}})
    runner.run(mix.SELECTED, arm, run_dir)
    selected_mix = read_table(run_dir, "selected_mix")
    assert selected_mix.head(problems.height).equals(problems.select(selected_mix.columns))
    assert selected_mix.slice(problems.height)["problem_id"].to_list() == read_table(run_dir, "selected")[
        "problem_id"].to_list()
    assert not table_path(run_dir, "augmented").exists()


def test_the_selected_arm_keeps_augmented_to_the_synthetic_problems() -> None:
    with pytest.raises(ValueError, match=r"set mix.sources: \[synthetic\]"):
        PipelineConfig.model_validate({"select": {"arm": True}})
    on = PipelineConfig.model_validate({"select": {"arm": True}, "mix": {"sources": ["synthetic"]}})
    steps = [stage.name for stage in all_stages() if stage.in_run and stage.is_on(on)]
    assert {"select", "mix_selected", "train_selection"} <= set(steps)
    assert not {"select", "mix_selected", "train_selection"} & {
        stage.name for stage in all_stages() if stage.in_run and stage.is_on(PipelineConfig())}


def test_a_pool_without_categories_is_labeled_by_the_categorizer_first(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    problems = write_identified_run(run_dir)
    pool = write_pool(tmp_path / "pool.jsonl", problems, tmp_path / "benchmark.jsonl")
    truth = {}
    rows = []
    for line in pool.read_text().splitlines():
        row = json.loads(line)
        truth[row["problem"]] = row.pop("category")
        rows.append(row)
    pool.write_text("".join(json.dumps(row) + "\n" for row in rows))
    cfg = PipelineConfig.model_validate({"select": {"pool": str(pool), "budget": 30, "band": False},
                                         "prepare": {"categorize": True}})
    runner.run(stage.STAGE, cfg, run_dir)
    selected = read_table(run_dir, "selected")
    assert selected.height == 30
    assert all(truth[problem] == category for problem, category in selected.select("problem", "category").iter_rows())
    rejected = pl.read_parquet(rejected_path(run_dir, "selected"))
    assert set(rejected.filter(pl.col("reject_reason") == "beyond_budget")["category_source"]) == {"model"}


def banded_run(tmp_path: Path, **select: object) -> tuple[Path, PipelineConfig, pl.DataFrame]:
    run_dir = tmp_path / "run"
    problems = write_identified_run(run_dir)
    pool = write_pool(tmp_path / "pool.jsonl", problems, tmp_path / "benchmark.jsonl")
    policy = {"engine": "oracle", "model": "arith-oracle", "options": {"labeler_error": 0.5}}
    cfg = PipelineConfig.model_validate({"select": {"pool": str(pool), "budget": 30, **select},
                                         "roles": {"policy": policy}, "filter": {"rollouts": 4},
                                         "mix": {"sources": ["synthetic"]}})
    return run_dir, cfg, problems


def test_with_the_band_the_budget_is_filled_with_problems_the_policy_solves_sometimes(tmp_path: Path) -> None:
    run_dir, cfg, _ = banded_run(tmp_path)
    assert cfg.select.band  # the default: selection is band-filtered like synthesis
    runner.run(stage.STAGE, cfg, run_dir)
    selected = read_table(run_dir, "selected")
    rejected = pl.read_parquet(rejected_path(run_dir, "selected"))
    out_of_band = rejected.filter(pl.col("reject_reason").str.starts_with("too "))
    assert selected.height == 30 and out_of_band.height > 0
    assert all((accuracy < 0.25) == reason.startswith("too hard") and (accuracy < 0.25 or accuracy > 0.75)
               for accuracy, reason in out_of_band.select("accuracy", "reject_reason").iter_rows())
    # the nearest come first: a problem passed over unscored is no nearer than the last one taken or scored
    for category in selected["category"].unique():
        here = pl.concat([selected.filter(pl.col("category") == category).select("distance"),
                          out_of_band.filter(pl.col("category") == category).select("distance")])
        unscored = rejected.filter((pl.col("category") == category) & (pl.col("reject_reason") == "beyond_budget"))
        assert unscored.is_empty() or unscored["distance"].min() >= here["distance"].max()


def test_the_selection_bytes_do_not_depend_on_the_torch_thread_count(tmp_path: Path) -> None:
    import torch

    previous = torch.get_num_threads()
    tables = []
    try:
        for threads in (1, 2):
            torch.set_num_threads(threads)
            run_dir = tmp_path / f"run-{threads}"
            problems = write_identified_run(run_dir)
            pool = write_pool(tmp_path / "pool.jsonl", problems, tmp_path / "benchmark.jsonl")
            cfg = PipelineConfig.model_validate({"select": {"pool": str(pool), "budget": 30, "band": False}})
            runner.run(stage.STAGE, cfg, run_dir)
            assert torch.get_num_threads() == threads  # set back after each pinned computation
            tables.append(table_path(run_dir, "selected").read_bytes())
    finally:
        torch.set_num_threads(previous)
    assert tables[0] == tables[1]


def test_embedding_runs_on_the_pinned_thread_count(monkeypatch) -> None:
    import numpy as np
    import torch

    from sws import embeddings
    from sws.config import EmbedderConfig
    from sws.pinned_threads import THREADS

    seen: list[int] = []

    class Recording:
        def encode(self, texts, **_):
            seen.append(torch.get_num_threads())
            return np.ones((len(texts), 4), np.float32)

    monkeypatch.setattr(embeddings, "load_model", lambda name: Recording())
    previous = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        embeddings.embed_texts(["a", "b"], EmbedderConfig())
        list(embeddings.embed_in_chunks(["a", "b", "c"], EmbedderConfig(), None, chunk_size=2))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(previous)
    assert seen == [THREADS] * 3
