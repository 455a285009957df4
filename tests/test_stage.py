"""The stage declarations: what the CLI, `sws run`, preflight, read errors and the report read."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from typer.testing import CliRunner

from sws import cli, runner
from sws.config import PipelineConfig
from sws.manifests import float_environment
from sws.run_dir import RunDir
from sws.runner import StageContext, StageOutput
from sws.stage import (
    STAGE_MODULES,
    Option,
    Stage,
    all_stages,
    get_stage,
    producer_of,
    run_stages,
    synthesis_steps,
)
from sws.stages import select
from sws.stages.eval import PARTS as EVAL_PARTS
from sws.tables import SCHEMAS, artifact_kind, read_table, write_table


def test_every_stage_is_named_as_its_module_and_declares_tables_with_schemas() -> None:
    modules = {entry.partition(":")[0] for entry in STAGE_MODULES}
    for stage in all_stages():
        # a stage is its module's name, or starts with it (train_<kind> lives in train)
        assert any(stage.name == module or stage.name.startswith(module + "_") for module in modules), stage.name
        assert all(artifact_kind(table) in SCHEMAS for table in (*stage.reads, *stage.writes)), stage.name


def test_sws_run_runs_the_method_in_order() -> None:
    assert [stage.title or stage.name for stage in run_stages()] == [
        "prepare", "train initial", "identify", "synthesize", "filter", "untargeted synthesis", "select",
        "select at random", "mix random selected", "mix", "mix selected", "oracle family", "export verl",
        "train baseline and augmented", "train selected and random_selected",
        "train oracle_family and oracle_family_large", "train untargeted", "cotrain initial reasoner", "cotrain cotrained",
        "cotrain frozen", "cotrain static", "cotrain shuffled", "eval", "report"]
    assert [stage.name for stage in synthesis_steps()] == ["extract", "combine", "generate", "rate", "label", "audit"]


def test_a_missing_table_names_the_command_that_writes_it() -> None:
    assert producer_of("weakness") == "sws identify"
    assert producer_of("concepts") == "sws synthesize --sub-steps extract"
    assert producer_of("rollouts") == "sws train initial (or sws ingest)"


def count_categories(context: StageContext) -> StageOutput:
    """A stage a user might add: problems per category."""
    counts = context.table("problems").group_by("category").len().sort("category")
    limit = context.cfg.identify.min_records  # a setting an option of the declaration sets
    return StageOutput(tables={"categories": counts.select(
        "category", n_problems=pl.col("len").cast(pl.Int64), n_weak=pl.lit(limit, pl.Int64),
        fail_ratio=pl.lit(0.0), share=pl.lit(0.0))})


def test_a_declared_stage_gets_its_command_from_the_declaration(tmp_path: Path) -> None:
    cli.declared_command(Stage(
        "count-categories", "Count the problems of each category.", count_categories, reads=("problems",),
        writes=("categories",), settings=lambda cfg, options: {"limit": cfg.identify.min_records}, options=(Option("identify.min_records", "Copied into n_weak.", int, "--limit"),)))
    write_table(tmp_path, "problems", pl.DataFrame({
        "problem_id": ["a", "b", "c"], "problem": ["1+1", "2+2", "3*3"], "answer": ["2", "4", "9"],
        "category": ["addition", "addition", "multiplication"], "source": ["t"] * 3}))

    result = CliRunner().invoke(cli.app, ["count-categories", "--run", str(tmp_path), "--limit", "7"])

    assert result.exit_code == 0, result.output
    counts = read_table(tmp_path, "categories")
    assert dict(zip(counts["category"], counts["n_problems"], strict=True)) == {"addition": 2, "multiplication": 1}
    assert counts["n_weak"].to_list() == [7, 7]
    assert "count-categories" in CliRunner().invoke(cli.app, ["--help"]).output


def test_stages_of_float_results_record_the_float_environment_and_the_others_do_not(tmp_path: Path) -> None:
    cfg, run = PipelineConfig(), RunDir(tmp_path)
    floating = {stage.name for stage in all_stages() if stage.float_results}
    assert {"train_initial", "train_augmented"} <= floating and "prepare" not in floating
    assert runner.plan(get_stage("train_initial"), cfg, run, 0, {}).settings["float_environment"] == (
        float_environment())
    assert "float_environment" not in runner.plan(get_stage("identify"), cfg, run, 0, {}).settings
    assert EVAL_PARTS["start"].float_results and select.FROM_POOL.float_results  # run by drives
