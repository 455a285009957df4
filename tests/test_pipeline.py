import io
import json
from pathlib import Path

import polars as pl
import pytest
from rich.console import Console
from typer.testing import CliRunner

from sws import pipeline
from sws.atomic_files import write_json
from sws.cli import app
from sws.config import PipelineConfig, load_config
from sws.errors import UserError
from sws.presets import PRESET_DIR
from sws.run_dir import RunDir
from sws.stages import eval as eval_stage
from sws.tables import SCHEMAS, write_table
from sws.world import get_world

METHOD_ORDER = [
    "prepare", "train initial", "identify", "synthesize", "filter", "mix", "export verl",
    "train baseline and augmented", "eval", "report",
]


def test_arith_pipeline_builds_its_world_first() -> None:
    names = [step.name for step in pipeline.pipeline_steps(PipelineConfig(world="arith"))]
    assert names == ["bootstrap policy", "seed set", *METHOD_ORDER]


def test_math_pipeline_starts_from_prepare() -> None:
    assert [step.name for step in pipeline.pipeline_steps(PipelineConfig(world="math"))] == METHOD_ORDER


@pytest.mark.parametrize("name", ["demo.yaml", "quick.yaml", "math12k-qwen2.5-7b.yaml"])
def test_shipped_pipelines_are_valid(name: str) -> None:
    load_config(PRESET_DIR / name)


def test_the_self_evolving_preset_has_the_policy_play_every_teacher_role_with_the_band_filter_on() -> None:
    cfg = load_config(PRESET_DIR / "self-evolving-math.yaml")
    teachers = [cfg.roles.extractor, cfg.roles.generator, *cfg.roles.judges, cfg.roles.labeler]
    assert {(role.engine, role.model) for role in teachers} == {("vllm", "policy")}
    assert cfg.filter.band == (0.25, 0.75)
    assert cfg.rounds.n > 1 and cfg.rounds.reference_judge is not None


def later_steps(tmp_path: Path) -> list[str]:
    return [step.name for step in pipeline.later_round_steps(PipelineConfig(), 2)]


def test_a_later_round_wires_its_inputs_then_runs_the_stages_from_identify_on(tmp_path: Path) -> None:
    assert later_steps(tmp_path) == ["round 2 inputs", "identify", "synthesize", "filter", "mix", "export verl",
                                     "train baseline and augmented", "eval", "report"]


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
    assert lines["remainders"] == ["0.0 %", "10.0 %", "40.0 %", "+30.0 pts"]
    assert lines["overall"] == ["10.0 %", "30.0 %", "45.0 %", "+15.0 pts"]
    assert "the 20 previously weak" in text


def test_headline_with_the_selected_arm_shows_it_and_its_gain_over_baseline() -> None:
    selected = {"weak_solved_selected": {"overall": 0.35, "per_category": {"addition": 0.6, "remainders": 0.1}}}
    text = rendered(pipeline.headline_table({**summary(), **selected}))
    lines = {line.split("│")[1].strip(): [cell.strip() for cell in line.split("│")[2:-1]]
             for line in text.splitlines() if line.count("│") >= 5}
    assert lines["overall"] == ["10.0 %", "30.0 %", "45.0 %", "35.0 %", "+15.0 pts", "+5.0 pts"]
    assert "selected − seed only" in text


def test_headline_without_baseline_has_no_gain_column() -> None:
    partial = {key: value for key, value in summary().items() if key != "weak_solved_baseline"}
    text = rendered(pipeline.headline_table(partial))
    assert "seed only" not in text
    assert "45.0 %" in text


def test_print_headline_names_the_report(tmp_path: Path) -> None:
    write_json(tmp_path / "summary.json", summary())
    console = Console(file=io.StringIO(), width=120)
    pipeline.print_headline(tmp_path, console)
    assert f"report: {tmp_path / 'report.html'}" in console.file.getvalue()
    assert "families" not in console.file.getvalue()


def test_the_last_screen_opens_with_each_arm_on_the_held_out_sets(tmp_path: Path) -> None:
    rows = [{"checkpoint": arm, "eval_set": "weak_like", "problem_id": f"p{i}", "category": "c",
             "greedy_correct": True, "n": 4, "n_correct": right, "k": 4, "problem": "?"}
            for arm, rights in (("baseline", [0, 1, 0, 1]), ("augmented", [2, 2, 1, 3])) for i, right in enumerate(rights)]
    per_problem = pl.DataFrame(rows, schema=SCHEMAS["eval/problems"])
    write_table(tmp_path, "eval/problems", per_problem)
    write_table(tmp_path, eval_stage.SETS, eval_stage.sets_table([eval_stage.EvalSet(
        "weak_like", per_problem.head(4).select("problem_id", "problem", pl.lit("1").alias("answer"), "category"), 4,
        held_out=True)]))
    write_json(tmp_path / "summary.json", summary())
    console = Console(file=io.StringIO(), width=200)
    pipeline.print_headline(tmp_path, console)
    text = console.file.getvalue()
    assert text.splitlines()[0].strip() == "The answer: Avg@k on the held-out sets"
    assert "weak_like (n=4)" in text and "12.5 % ± 7.2" in text and "+37.5 ± 7.2 pts *" in text
    assert text.index("+37.5") < text.index("Diagnostics")


def test_print_headline_adds_the_weak_families_line_when_eval_measured_it(tmp_path: Path) -> None:
    like = {f"weak_like_solved_{name}": {"overall": share, "per_category": {}}
            for name, share in (("initial", 0.2), ("baseline", 0.25), ("augmented", 0.3))}
    write_json(tmp_path / "summary.json", {**summary(), **like})
    console = Console(file=io.StringIO(), width=200)
    pipeline.print_headline(tmp_path, console)
    assert "initial 20.0 %, seed only 25.0 %, synthetic 30.0 %" in console.file.getvalue()


def test_headline_lines_give_augmented_minus_baseline_with_its_paired_standard_error() -> None:
    shares = {f"weak_avg_k_{name}": {"overall": share, "per_category": {}}
              for name, share in (("initial", 0.10), ("baseline", 0.20), ("augmented", 0.23))}
    errors = {"standard_errors": {"weak": {"augmented − baseline": {"pass1": 0.04, "avg_k": 0.012}}}}
    assert pipeline.headline_lines({**shares, **errors}) == [
        "Weak problems, share of k samples right: initial 10.0 %, seed only 20.0 %, synthetic 23.0 % "
        "(synthetic − seed only +3.0 ± 1.2 pts, one standard error)"]
    assert pipeline.headline_lines(summary()) == []


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


def test_the_rounds_option_sets_rounds_n(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = {}
    monkeypatch.setattr(pipeline, "run", lambda cfg, run_dir, force=False, source=None: seen.update(n=cfg.rounds.n))
    monkeypatch.setattr(pipeline, "print_headline", lambda run_dir: None)
    result = CliRunner().invoke(app, ["run", "quick", "--run", str(tmp_path / "run"),
                                      "--rounds", "3"])
    assert result.exit_code == 0, result.output
    assert seen == {"n": 3}
    assert CliRunner().invoke(app, ["run", "quick", "--run", str(tmp_path / "run"),
                                    "--rounds", "0"]).exit_code == 2


def test_the_rounds_table_prints_each_rounds_statuses(tmp_path: Path) -> None:
    import polars as pl

    from sws.tables import write_table

    write_table(tmp_path, "rounds_summary", pl.DataFrame({
        "round": [1, 2], "n_weak": [10, 6], "n_new": [10, 2], "n_persisting": [0, 4], "n_resolved": [0, 6],
        "n_relapsed": [0, 0], "resolved_share": [None, 0.6], "n_kept": [5, 4], "weak_solved_baseline": [0.3, 0.2],
        "weak_solved_augmented": [0.4, 0.5]}))
    console = Console(file=io.StringIO(), width=200)
    pipeline.print_rounds(tmp_path, console)
    text = console.file.getvalue()
    assert "60.0%" in text and "│     2 │" in text.replace("┃", "│")
    pipeline.print_rounds(tmp_path / "elsewhere", console)  # one round: nothing more
    assert console.file.getvalue() == text
