"""make_engine (the registry in sws/engines/__init__.py), role lookup, and bad engine input through the CLI."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from sws.cli import app
from sws.config import EngineConfig, PipelineConfig, role_config
from sws.engines import CachedEngine, Request, make_engine
from sws.errors import UserError
from sws.worlds.arith.world import ORACLE


def one_line_error(cfg: EngineConfig, run_dir: Path | None = None) -> str:
    with pytest.raises(UserError) as error:
        make_engine(cfg, run_dir)
    message = str(error.value)
    assert "\n" not in message
    return message


def test_an_unknown_engine_name_is_a_one_line_user_error() -> None:
    message = one_line_error(EngineConfig(engine="vlm", model="m"))
    assert "engine 'vlm' is not known (field 'engine'" in message
    assert all(name in message for name in ("hf", "openai", "oracle", "vllm"))


@pytest.mark.parametrize("engine", ["hf", "vllm"])
def test_a_model_folder_that_does_not_exist_is_a_one_line_user_error(engine: str, tmp_path: Path) -> None:
    missing = tmp_path / "models" / "nope"
    message = one_line_error(EngineConfig(engine=engine, model=str(missing)))
    assert f"model folder '{missing}' does not exist (field 'model'" in message


def test_a_hub_id_missing_from_the_offline_cache_is_a_user_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    message = one_line_error(EngineConfig(engine="hf", model="no-such-org/no-such-model-xyz"))
    assert "not a local folder and not in the Hugging Face cache" in message


def test_with_a_run_directory_the_engine_is_behind_the_runs_request_cache(tmp_path: Path) -> None:
    cfg = EngineConfig(**ORACLE, options={"seed": 3})
    request = Request(messages=({"role": "user", "content": "label"},), n=2, seed=5, task="label",
                      fields={"problem": "Compute 47+85."})
    engine = make_engine(cfg, tmp_path / "requests.sqlite")
    assert isinstance(engine, CachedEngine) and engine.name == "oracle"
    first = engine.generate([request])
    again = make_engine(cfg, tmp_path / "requests.sqlite")
    assert again.generate([request]) == first
    assert again.hit_rate == 1.0
    assert (tmp_path / "requests.sqlite").is_file()


def test_without_a_run_directory_there_is_no_cache() -> None:
    assert not isinstance(make_engine(EngineConfig(**ORACLE)), CachedEngine)


def test_roles_are_found_by_their_yaml_names() -> None:
    cfg = PipelineConfig.model_validate({"roles": {
        "generator": {"engine": "openai", "model": "big"},
        "judges": [{"engine": "oracle", "model": "judge-a"}, {"engine": "oracle", "model": "judge-b"}],
    }})
    assert role_config(cfg, "generator").model == "big"
    assert role_config(cfg, "judges.1").model == "judge-b"
    with pytest.raises(UserError, match="role 'judges.2' is not in the pipeline config.*judges.0, judges.1"):
        role_config(cfg, "judges.2")


def test_the_auditor_is_a_role_once_it_is_set() -> None:
    cfg = PipelineConfig()
    with pytest.raises(UserError, match="field 'roles.auditor' is not set"):
        role_config(cfg, "auditor")
    cfg.roles.auditor = EngineConfig(engine="oracle", model="checker")
    assert role_config(cfg, "auditor").model == "checker"


# ------------------------------------------------------------------ through the CLI (`sws sample`)


def sample(tmp_path: Path, roles: dict, *args: str):
    pipeline = tmp_path / "pipeline.yaml"
    pipeline.write_text(yaml.safe_dump({"roles": roles}))
    return CliRunner().invoke(app, ["sample", "--run", str(tmp_path / "run"), "--config", str(pipeline), *args])


def assert_exit_2_with_one_line(result, expected: str) -> None:
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert expected in result.stderr
    assert "Traceback" not in result.output


def test_cli_unknown_engine_exits_2(tmp_path: Path) -> None:
    result = sample(tmp_path, {"generator": {"engine": "gpt", "model": "gpt-4"}}, "--role", "generator", "--prompt", "hi")
    assert_exit_2_with_one_line(result, "engine 'gpt' is not known")


def test_cli_missing_model_folder_exits_2(tmp_path: Path) -> None:
    result = sample(tmp_path, {"policy": {"engine": "hf", "model": str(tmp_path / "gone")}}, "--prompt", "hi")
    assert_exit_2_with_one_line(result, "does not exist (field 'model'")


def test_cli_server_refusing_connections_exits_2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    roles = {"generator": {"engine": "openai", "model": "m", "options": {"base_url": f"http://127.0.0.1:{port}/v1"}}}
    result = sample(tmp_path, roles, "--role", "generator", "--prompt", "hi")
    assert_exit_2_with_one_line(result, f"cannot reach the server at http://127.0.0.1:{port}/v1")


def test_cli_sample_prints_each_completion(tmp_path: Path, random_policy: Path) -> None:
    result = sample(tmp_path, {"policy": {"engine": "hf", "model": str(random_policy)}},
                    "--prompt", "Compute 1+2.", "-n", "3", "--max-tokens", "5")
    assert result.exit_code == 0, result.output
    assert [line.startswith("--- completion") for line in result.stdout.splitlines()].count(True) == 3
