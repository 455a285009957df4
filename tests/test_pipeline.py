import io
import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from sws import pipeline
from sws.artifacts import write_json
from sws.cli import app
from sws.config import PipelineConfig, load_config
from sws.errors import UserError
from sws.run_dir import RunDir
from sws.world import get_world

PIPELINES = Path(__file__).resolve().parents[1] / "pipelines"
METHOD_ORDER = [
    "prepare", "train initial", "identify", "synthesize", "filter", "mix", "export verl",
    "train augmented and baseline", "eval", "report",
]


def test_arith_pipeline_builds_its_world_first() -> None:
    names = [step.name for step in pipeline.pipeline_steps(PipelineConfig(world="arith"))]
    assert names == ["bootstrap policy", "seed set", *METHOD_ORDER]


def test_math_pipeline_starts_from_prepare() -> None:
    assert [step.name for step in pipeline.pipeline_steps(PipelineConfig(world="math"))] == METHOD_ORDER


@pytest.mark.parametrize("name", ["demo.yaml", "quick.yaml", "math12k-qwen2.5-7b.yaml"])
def test_shipped_pipelines_are_valid(name: str) -> None:
    load_config(PIPELINES / name)


def summary() -> dict:
    return {
        "weak_solved_initial": {"overall": 0.1, "per_category": {"addition": 0.2, "remainders": 0.0}},
        "weak_solved_baseline": {"overall": 0.3, "per_category": {"addition": 0.5, "remainders": 0.1}},
        "weak_solved_augmented": {"overall": 0.45, "per_category": {"addition": 0.5, "remainders": 0.4}},
        "n_weak": 20,
    }


def rendered(table) -> str:
    console = Console(file=io.StringIO(), width=120)
    console.print(table)
    return console.file.getvalue()


def test_headline_shows_each_policy_and_the_gain_over_baseline() -> None:
    text = rendered(pipeline.headline_table(summary()))
    lines = {line.split("│")[1].strip(): [cell.strip() for cell in line.split("│")[2:-1]]
             for line in text.splitlines() if line.count("│") >= 5}
    assert lines["remainders"] == ["0.0%", "10.0%", "40.0%", "+30.0%"]
    assert lines["overall"] == ["10.0%", "30.0%", "45.0%", "+15.0%"]
    assert "20 weak problems" in text


def test_headline_without_baseline_has_no_gain_column() -> None:
    partial = {key: value for key, value in summary().items() if key != "weak_solved_baseline"}
    text = rendered(pipeline.headline_table(partial))
    assert "baseline" not in text
    assert "45.0%" in text


def test_print_headline_names_the_report(tmp_path: Path) -> None:
    write_json(tmp_path / "summary.json", summary())
    console = Console(file=io.StringIO(), width=120)
    pipeline.print_headline(tmp_path, console)
    assert f"report: {tmp_path / 'report.html'}" in console.file.getvalue()
    assert "families" not in console.file.getvalue()


def test_print_headline_adds_the_weak_families_line_when_eval_measured_it(tmp_path: Path) -> None:
    like = {f"weak_like_solved_{name}": {"overall": share, "per_category": {}}
            for name, share in (("initial", 0.2), ("baseline", 0.25), ("augmented", 0.3))}
    write_json(tmp_path / "summary.json", {**summary(), **like})
    console = Console(file=io.StringIO(), width=200)
    pipeline.print_headline(tmp_path, console)
    assert "initial 20.0%, baseline 25.0%, augmented 30.0%" in console.file.getvalue()


def test_print_headline_without_eval_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="sws eval"):
        pipeline.print_headline(tmp_path)


def test_run_with_a_missing_pipeline_file_is_one_line_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["run", str(tmp_path / "nope.yaml"), "--run", str(tmp_path / "run")])
    assert result.exit_code == 2
    assert "pipeline file not found" in result.output
    assert "Traceback" not in result.output


def test_seed_set_draws_only_the_configured_levels_and_redraws_when_they_change(tmp_path: Path) -> None:
    config = PipelineConfig(world="arith")
    config.world_settings.n_seed_problems = 30
    config.world_settings.seed_levels = ["easy", "medium"]
    get_world("arith").seed_set_step(config, tmp_path, False)
    path = RunDir(tmp_path).seed_file("arith")
    levels = {json.loads(line)["level"] for line in path.read_text().splitlines()}
    assert levels == {"easy", "medium"}
    config.world_settings.seed_levels = ["hard"]
    get_world("arith").seed_set_step(config, tmp_path, False)
    assert {json.loads(line)["level"] for line in path.read_text().splitlines()} == {"hard"}


def test_seed_set_draws_only_the_configured_categories(tmp_path: Path) -> None:
    config = PipelineConfig(world="arith")
    config.world_settings.n_seed_problems = 30
    config.world_settings.seed_categories = ["addition", "subtraction", "multiplication"]
    get_world("arith").seed_set_step(config, tmp_path, False)
    lines = RunDir(tmp_path).seed_file("arith").read_text().splitlines()
    assert len(lines) == 30
    assert {json.loads(line)["category"] for line in lines} == {"addition", "subtraction", "multiplication"}
