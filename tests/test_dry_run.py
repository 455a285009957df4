"""`sws run --dry-run` on a fresh run directory: every step listed, in order, and nothing written."""

from typer.testing import CliRunner

from sws.cli import app
from sws.config import load_config
from sws.dry_run import plan_run
from sws.pipeline import pipeline_steps
from sws.presets import PRESET_DIR


def test_a_fresh_run_lists_every_step_with_why_it_would_run_and_creates_nothing(tmp_path):
    run_dir = tmp_path / "new-run"

    result = CliRunner().invoke(app, ["run", "quick", "--run", str(run_dir), "--dry-run"])

    assert result.exit_code == 0, result.output
    assert not run_dir.exists()
    assert "seed set" in result.stdout and "would run: seed_set: not run yet" in result.stdout
    assert "waits on seed set, which would run first" in result.stdout


def test_the_plan_has_the_steps_of_sws_run_in_order(tmp_path):
    cfg = load_config(PRESET_DIR / "quick.yaml")

    planned = plan_run(cfg, tmp_path / "run")

    assert [step.name for step in planned] == [step.name for step in pipeline_steps(cfg)]
    seed_set = next(index for index, step in enumerate(planned) if step.name == "seed set")
    assert planned[seed_set].would_run == "seed_set: not run yet"
    assert all(step.would_run == "waits on seed set, which would run first" for step in planned[seed_set + 1:])
    assert not (tmp_path / "run").exists()


def test_later_rounds_are_named_as_not_checked(tmp_path):
    result = CliRunner().invoke(app, ["run", "quick", "--run", str(tmp_path / "run"), "--dry-run", "--rounds", "3"])

    assert result.exit_code == 0, result.output
    assert "then rounds 2 to 3 in" in result.stdout and "(not checked by --dry-run)" in result.stdout
    assert not (tmp_path / "run").exists()



def test_a_pipeline_that_says_where_it_has_not_run_says_so_first_and_a_co_training_one_shows_its_plan(tmp_path):
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text("not_run: not on a GPU yet\ncotrain: {arms: [frozen], only: true, steps: 3}\n")

    result = CliRunner().invoke(app, ["run", str(pipeline), "--run", str(tmp_path / "run"), "--dry-run"])

    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("NOT RUN: not on a GPU yet\n")
    assert "co-training plan" in result.stdout and "frozen: 3 steps each" in result.stdout
    quick = CliRunner().invoke(app, ["run", "quick", "--run", str(tmp_path / "quick"), "--dry-run"])
    assert "NOT RUN" not in quick.stdout and "co-training plan" not in quick.stdout
