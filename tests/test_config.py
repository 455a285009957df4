from pathlib import Path

import pytest
import yaml
from word_world import RULES

from sws.config import (
    PipelineConfig,
    load_config,
    load_run_config,
    parse_config,
    save_run_config,
    with_overrides,
)
from sws.errors import UserError


def write_yaml(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data))
    return path


def test_an_empty_pipeline_file_gives_the_defaults(tmp_path):
    path = tmp_path / "empty.yaml"
    path.write_text("")
    assert load_config(path) == PipelineConfig()


def test_a_pipeline_file_sets_nested_fields(tmp_path):
    path = write_yaml(tmp_path / "p.yaml", {"seed": 3, "identify": {"max_acc": 0.25},
                                            "roles": {"judges": [{"engine": "openai", "model": "m"}]}})
    config = load_config(path)
    assert (config.seed, config.identify.max_acc) == (3, 0.25)
    assert config.roles.judges[0].engine == "openai"
    assert config.identify.max_slope == 0.0  # untouched fields keep their defaults


@pytest.mark.parametrize(
    ("data", "key"),
    [({"identfy": {}}, "identfy"), ({"identify": {"max_accuracy": 0.5}}, "identify.max_accuracy"),
     ({"roles": {"judges": [{"engine": "oracle", "temp": 1}]}}, "roles.judges.0.temp")],
)
def test_an_unknown_key_is_an_error_that_names_it(tmp_path, data, key):
    path = write_yaml(tmp_path / "p.yaml", data)
    with pytest.raises(UserError) as error:
        load_config(path)
    message = str(error.value)
    assert message.startswith(str(path)) and f"unknown key '{key}'" in message
    assert "\n" not in message


def test_a_value_of_the_wrong_type_names_the_field(tmp_path):
    path = write_yaml(tmp_path / "p.yaml", {"identify": {"max_acc": "half"}})
    with pytest.raises(UserError, match=r"field 'identify\.max_acc'"):
        load_config(path)


@pytest.mark.parametrize(("text", "phrase"), [("seed: [1\n", "not valid YAML"), ("- 1\n- 2\n", "mapping")])
def test_malformed_yaml_is_a_one_line_error(tmp_path, text, phrase):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    with pytest.raises(UserError, match=phrase) as error:
        load_config(path)
    assert "\n" not in str(error.value)


def test_a_missing_pipeline_file_is_a_user_error(tmp_path):
    with pytest.raises(UserError, match="pipeline file not found"):
        load_config(tmp_path / "nope.yaml")


def test_overrides_set_dotted_paths_and_ignore_none():
    config = with_overrides(PipelineConfig(), {"identify.max_acc": 0.3, "identify.strict_slope": None, "seed": 7})
    assert (config.identify.max_acc, config.identify.strict_slope, config.seed) == (0.3, False, 7)


def test_an_override_of_an_unknown_field_is_an_error():
    with pytest.raises(UserError, match="command-line options: unknown key 'identify.max_accuracy'"):
        with_overrides(PipelineConfig(), {"identify.max_accuracy": 0.3})


def test_run_config_comes_from_the_pipeline_then_the_run_then_defaults(tmp_path):
    run_dir = tmp_path / "run"
    assert load_run_config(run_dir) == PipelineConfig()
    save_run_config(run_dir, PipelineConfig(seed=5))
    assert load_run_config(run_dir).seed == 5
    pipeline = write_yaml(tmp_path / "p.yaml", {"seed": 9})
    assert load_run_config(run_dir, pipeline).seed == 9
    assert load_run_config(run_dir, pipeline, {"seed": 11}).seed == 11


def test_a_saved_config_reads_back_equal(tmp_path):
    config = PipelineConfig(seed=2).model_copy(update={"prepare": parse_config(
        {"prepare": {"input": "x.json", "categories": ["Algebra"]}}, "test").prepare})
    save_run_config(tmp_path, config)
    assert load_run_config(tmp_path) == config


def test_the_worlds_section_is_read_by_its_model_and_written_back_under_its_name(tmp_path):
    config = load_config(write_yaml(tmp_path / "p.yaml", {"world": "arith", "arith": {"n_seed_problems": 7}}))
    assert config.world_settings.n_seed_problems == 7
    dumped = config.model_dump(mode="json")
    assert list(dumped)[:3] == ["seed", "world", "arith"] and dumped["arith"]["n_seed_problems"] == 7
    assert with_overrides(config, {"arith.n_seed_problems": 9}).world_settings.n_seed_problems == 9


@pytest.mark.parametrize(("data", "phrase"), [
    ({"arith": {"n_seed": 3}}, "unknown key 'arith.n_seed'"),
    ({"arith": {"n_seed_problems": 0}}, "field 'arith.n_seed_problems'"),
    ({"world": "math", "arith": {"n_seed_problems": 5}}, "section 'arith' belongs to world 'arith'"),
    ({"world": "nowhere"}, "world 'nowhere' is not known; use one of: arith"),
])
def test_a_wrong_world_section_is_one_line_naming_it(tmp_path, data, phrase):
    path = write_yaml(tmp_path / "p.yaml", data)
    with pytest.raises(UserError) as error:
        load_config(path)
    assert phrase in str(error.value) and str(error.value).startswith(str(path))


def test_a_math_runs_config_from_before_worlds_owned_their_sections_still_loads(tmp_path):
    # Such a config.yaml holds the arith defaults whatever its world.
    old = {**PipelineConfig(world="math").model_dump(mode="json"), "arith": PipelineConfig().world_settings.model_dump()}
    assert load_config(write_yaml(tmp_path / "config.yaml", old)).world == "math"


@pytest.mark.parametrize("seed", [-1, 2**32, 10**23])
def test_a_seed_out_of_range_is_one_line_naming_the_field(tmp_path, seed):
    with pytest.raises(UserError, match=r"field 'seed'"):
        load_config(write_yaml(tmp_path / "p.yaml", {"seed": seed}))


def test_the_largest_seed_every_library_takes_is_accepted(tmp_path):
    assert load_config(write_yaml(tmp_path / "p.yaml", {"seed": 2**32 - 1})).seed == 2**32 - 1


def test_an_empty_config_yaml_in_a_run_is_refused_not_read_as_the_defaults(tmp_path):
    save_run_config(tmp_path, PipelineConfig(seed=3))
    (tmp_path / "config.yaml").write_text("\n")
    with pytest.raises(UserError, match=r"config\.yaml: empty, so the settings this run was made with are lost"):
        load_run_config(tmp_path)


def test_a_repeated_key_in_a_pipeline_file_is_refused(tmp_path):
    path = tmp_path / "p.yaml"
    path.write_text("seed: 1\nidentify: {max_acc: 0.5}\nseed: 2\n")
    with pytest.raises(UserError, match=r"p\.yaml: not valid YAML \(key 'seed' is given twice"):
        load_config(path)


def test_teacher_roles_left_out_come_from_the_world_and_a_role_names_its_engine_and_model(tmp_path):
    assert PipelineConfig().roles.labeler.model_dump(include={"engine", "model"}) == {
        "engine": "oracle", "model": "arith-oracle"}
    assert PipelineConfig(world="wordsums").roles.labeler.model_dump(include={"engine", "model"}) == RULES
    assert PipelineConfig(world="math").roles.labeler is None
    path = write_yaml(tmp_path / "p.yaml", {"roles": {"auditor": {"model": "checker"}}})
    with pytest.raises(UserError, match=r"field 'roles\.auditor\.engine': Field required"):
        load_config(path)


def test_the_default_reward_stays_out_of_a_saved_config_so_older_runs_keep_their_hashes(tmp_path):
    save_run_config(tmp_path, PipelineConfig())
    assert "reward" not in yaml.safe_load((tmp_path / "config.yaml").read_text())["train"]
    assert load_run_config(tmp_path).train.reward == "correct"
    chosen = PipelineConfig.model_validate({"train": {"reward": "brevity"}})
    save_run_config(tmp_path, chosen)
    assert load_run_config(tmp_path).train.reward == "brevity"


def test_fewer_co_training_reasoner_tasks_than_cards_a_step_is_refused_in_one_line(tmp_path):
    path = write_yaml(tmp_path / "p.yaml", {"cotrain": {"batch_size": 8, "reasoner_tasks": 4}})
    with pytest.raises(UserError, match=r"reasoner_tasks \(4\) is below batch_size \(8\)") as error:
        load_config(path)
    assert str(error.value).startswith(str(path)) and "\n" not in str(error.value)
    assert load_config(write_yaml(tmp_path / "q.yaml", {"cotrain": {"batch_size": 8, "reasoner_tasks": 8}}))
