import re

import pytest
import typer
import yaml
from typer.testing import CliRunner

from sws.cli import app


def command_paths(group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    """Every command and subcommand but the hidden old names, e.g. ("prepare",), ("world",), ("world", "seed-set")."""
    paths = []
    for name, command in sorted(group.commands.items()):
        if command.hidden:
            continue
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
    (tmp_path / "run").mkdir()
    result = sws("identify", "--run", str(tmp_path / "run"))
    assert_one_line_error(result, "run `sws prepare")


@pytest.mark.parametrize("command", [["report"], ["identify"], ["eval"], ["train", "baseline"], ["filter"],
                                     ["sample", "--prompt", "1+1"]])
def test_a_run_directory_that_is_not_there_is_an_error_and_nothing_is_created(tmp_path, command):
    result = sws(*command, "--run", str(tmp_path / "runs" / "dmeo"))
    assert_one_line_error(result, "no such run directory; check --run")
    assert not (tmp_path / "runs").exists()


def test_an_unknown_key_in_the_pipeline_file_is_one_line_naming_it(tmp_path):
    pipeline = tmp_path / "p.yaml"
    pipeline.write_text(yaml.safe_dump({"identify": {"max_acc": 0.5, "slope_max": 0}}))
    (tmp_path / "run").mkdir()
    result = sws("identify", "--run", str(tmp_path / "run"), "--config", str(pipeline))
    assert_one_line_error(result, "unknown key 'identify.slope_max'")


def test_a_bad_option_value_is_one_line_naming_the_field(tmp_path):
    result = sws("prepare", "--run", str(tmp_path / "run"), "--input", str(tmp_path / "x.json"), "--preset", "nope")
    assert_one_line_error(result, "unknown preset 'nope'")


def test_the_math_world_without_teachers_is_refused_before_any_step(tmp_path):
    pipeline = tmp_path / "math.yaml"
    pipeline.write_text("world: math\n")
    (tmp_path / "run").mkdir()
    result = sws("synthesize", "--run", str(tmp_path / "run"), "--config", str(pipeline))
    assert_one_line_error(result, "fields 'roles.extractor', 'roles.generator', 'roles.judges', 'roles.labeler' "
                                  "are not set")
    assert "roles: {extractor: {engine:" in result.stderr
    assert not (tmp_path / "run" / "config.yaml").exists()


def test_the_arith_oracle_is_refused_in_the_math_world(tmp_path):
    pipeline = tmp_path / "math.yaml"
    pipeline.write_text("world: math\nroles:\n  extractor: {engine: oracle, model: arith-oracle}\n")
    (tmp_path / "run").mkdir()
    result = sws("synthesize", "--run", str(tmp_path / "run"), "--config", str(pipeline), "--sub-steps", "extract")
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
    result = CliRunner().invoke(app, ["sample", "--run", str(tmp_path / "run"), "--prompt", "hi", option, value],
                                env={"COLUMNS": "200"})
    assert result.exit_code == 2 and "greater than or equal to" in result.output
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("command", [["identify"], ["train", "initial"], ["synthesize"], ["run"], [], ["world"],
                                     ["world", "seed-set"]])
def test_flags_read_as_flags_in_help(command):
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0
    flags = ("--force", "--quiet", "--strict-slope", "--dry-run", "--estimate", "--help")
    flag_lines = [line for line in result.output.splitlines() if any(flag in line for flag in flags)]
    assert any("--help" in line for line in flag_lines) and not any("<bool>" in line for line in flag_lines)


def test_help_lists_the_commands_in_pipeline_order():
    result = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    listed = [line.split()[1] for line in result.output.splitlines() if line.startswith("│ ") and len(line.split()) > 2
              and not line.startswith("│   ")]
    listed = [name for name in listed if name in ("run", "prepare", "train", "identify", "synthesize", "filter",
                                                  "mix", "eval", "report", "compare")]
    assert listed == ["run", "prepare", "train", "identify", "synthesize", "filter", "mix", "eval", "report",
                      "compare"]


def help_text(*path: str) -> str:
    """A command's --help on one line per option (wide enough that nothing wraps), spaces collapsed."""
    result = CliRunner().invoke(app, [*path, "--help"], env={"COLUMNS": "400"})
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def test_help_says_where_a_default_comes_from():
    assert "[default: the run's config (filter.band); built-in 0.25 0.75]" in help_text("filter")
    assert "[default: the run's config (train.KIND_steps); built-in 200]" in help_text("train")
    assert "[default: the run's config (select.budget)]" in help_text("select")


# A world's own commands (`sws world ...`) read no run's config; their defaults are the world's.
@pytest.mark.parametrize("path", [path for path in COMMANDS if path[0] != "world"], ids=" ".join)
def test_every_default_in_help_says_where_it_comes_from(path):
    from sws.stage import all_stages

    text = help_text(*path)
    assert "(default" not in text  # a default written by hand into an option's help
    declared = [option for stage in all_stages() if (stage.command or f"sws {stage.name}").split()[1] == path[0]
                for option in stage.options]
    for option in declared:
        assert f"[default: the run's config ({option.field})" in text, option.field


@pytest.mark.parametrize("path", [path for path in COMMANDS if path[0] == "world" and len(path) > 1], ids=" ".join)
def test_a_world_commands_defaults_name_the_world_setting_they_stand_for(path):
    text = help_text(*path)
    assert "(default" not in text
    if path[1] in ("seed-set", "bootstrap"):
        assert re.search(r"\[default: \d+, arith\.\w+'s built-in value\]", text), text


@pytest.mark.parametrize("command", [["filter"], ["eval"], ["sample"]])
def test_samples_per_problem_is_one_flag_in_every_command(command):
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": "200"})
    assert "--samples" in result.output and "--rollouts" not in result.output and "--k " not in result.output


def test_the_synthesis_caps_are_caps_not_token_limits():
    result = CliRunner().invoke(app, ["synthesize", "--help"], env={"COLUMNS": "200"})
    assert "--token-cap" in result.output and "--cost-cap" in result.output and "--max-tokens" not in result.output


def test_every_command_name_is_words_joined_by_hyphens():
    import re

    assert ("mix-selected",) in COMMANDS and ("world", "seed-set") in COMMANDS
    assert all(re.fullmatch(r"[a-z]+(-[a-z]+)*", name) for path in COMMANDS for name in path), COMMANDS


def test_a_command_s_old_underscore_name_still_runs_and_says_its_new_one(tmp_path):
    result = sws("mix_selected", "--run", str(tmp_path / "missing"))
    assert result.exit_code == 2
    assert result.stderr.splitlines()[0] == ("warning: `sws mix_selected` is now `sws mix-selected`; the old name "
                                             "goes in the next release")
    assert "mix_selected" not in help_text()


def test_steps_are_grpo_steps_and_no_flag_is_a_bare_budget():
    helps = {path: help_text(*path) for path in COMMANDS if path[0] != "world"}
    assert [path for path, text in helps.items() if "--steps " in text] == [("train",)]
    assert "--sub-steps" in helps[("synthesize",)] and "--concept-sets" in helps[("synthesize",)]
    assert "--problems" in helps[("select",)]
    assert not [path for path, text in helps.items() if "--budget" in text]
