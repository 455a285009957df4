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
