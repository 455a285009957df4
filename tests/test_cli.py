import pytest
import typer
import yaml
from typer.testing import CliRunner

from sws.cli import app


def command_paths(group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and subcommand, e.g. ("prepare",), ("world",), ("world", "seed-set")."""
    paths = []
    for name, command in sorted(group.commands.items()):
        paths.append((*prefix, name))
        if hasattr(command, "commands"):  # a group (typer vendors its own click, so no isinstance check)
            paths += command_paths(command, (*prefix, name))
    return paths


COMMANDS = command_paths(typer.main.get_command(app))


def sws(*args: str):
    return CliRunner().invoke(app, list(args))


def test_version_prints_the_packages_version():
    from sws import __version__

    result = sws("--version")
    assert result.exit_code == 0 and result.output.strip() == f"sws {__version__}"


def test_top_level_help_shows_an_example():
    result = sws("--help")
    assert result.exit_code == 0
    assert "Example: sws run" in result.output


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_every_command_help_shows_an_example(path):
    result = sws(*path, "--help")
    assert result.exit_code == 0, result.output
    assert f"Example: sws {' '.join(path)}" in " ".join(result.output.split())


def assert_one_line_error(result, phrase: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: ") and phrase in lines[0], lines[0]
    assert "Traceback" not in result.output


def test_a_missing_artifact_is_one_line_naming_the_command_to_run(tmp_path):
    result = sws("identify", "--run", str(tmp_path / "run"))
    assert_one_line_error(result, "run `sws prepare")


def test_an_unknown_key_in_the_pipeline_file_is_one_line_naming_it(tmp_path):
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(yaml.safe_dump({"identify": {"max_acc": 0.5, "slope_max": 0}}))
    result = sws("identify", "--run", str(tmp_path / "run"), "--config", str(pipeline))
    assert_one_line_error(result, "unknown key 'identify.slope_max'")


def test_a_bad_option_value_is_one_line_naming_the_field(tmp_path):
    result = sws("prepare", "--run", str(tmp_path / "run"), "--input", str(tmp_path / "x.json"), "--preset", "nope")
    assert_one_line_error(result, "unknown preset 'nope'")


def test_the_math_world_without_teachers_is_refused_before_any_step(tmp_path):
    pipeline = tmp_path / "math.yaml"
    pipeline.write_text("world: math\n")
    result = sws("synthesize", "--run", str(tmp_path / "run"), "--config", str(pipeline))
    assert_one_line_error(result, "field 'roles.extractor' is not set")
    assert "roles: {extractor: {engine:" in result.stderr
    assert not (tmp_path / "run" / "config.yaml").exists()


def test_the_arith_oracle_is_refused_in_the_math_world(tmp_path):
    pipeline = tmp_path / "math.yaml"
    pipeline.write_text("world: math\nroles:\n  extractor: {engine: oracle, model: arith-oracle}\n")
    result = sws("synthesize", "--run", str(tmp_path / "run"), "--config", str(pipeline), "--steps", "extract")
    assert_one_line_error(result, "only knows the arith world")


def test_a_failed_command_leaves_the_run_config_unchanged(tmp_path):
    run = tmp_path / "run"
    assert sws("prepare", "--run", str(run), "--input", str(tmp_path / "missing.json")).exit_code == 2
    assert not (run / "config.yaml").exists()
    pipeline = tmp_path / "bad.yaml"
    pipeline.write_text("roles:\n  judges: []\n")
    assert_one_line_error(sws("identify", "--run", str(run), "--config", str(pipeline)), "roles.judges")
    assert not (run / "config.yaml").exists()


def test_pipeline_paths_are_relative_to_the_pipeline_file(tmp_path, monkeypatch):
    from sws.config import load_config

    folder = tmp_path / "pipelines"
    folder.mkdir()
    (tmp_path / "seed.jsonl").write_text("")
    (folder / "p.yaml").write_text("prepare: {input: ../seed.jsonl}\nsynthesize: {reference_files: [../seed.jsonl]}\n")
    monkeypatch.chdir("/")
    config = load_config(folder / "p.yaml")
    assert config.prepare.input == str(tmp_path / "seed.jsonl")
    assert config.synthesize.reference_files == [str(tmp_path / "seed.jsonl")]


@pytest.mark.parametrize("option, value", [("-n", "-3"), ("-n", "0"), ("--max-tokens", "0"), ("--seed", "-1")])
def test_sample_refuses_a_count_below_one_before_any_call(tmp_path, option, value):
    result = CliRunner().invoke(app, ["sample", "--run", str(tmp_path / "run"), "--prompt", "hi", option, value])
    assert result.exit_code == 2 and "greater than or equal to" in result.output
    assert not (tmp_path / "run").exists()
