from pathlib import Path

import pytest

from sws.config import PipelineConfig
from sws.errors import UserError
from sws.policy import policy_role
from sws.run_dir import RunDir


def test_an_empty_policy_model_means_the_runs_initial_checkpoint(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="sws train initial"):
        policy_role(PipelineConfig(), tmp_path)
    RunDir(tmp_path).initial_checkpoint.mkdir(parents=True)
    assert policy_role(PipelineConfig(), tmp_path).model == str(tmp_path / "train" / "initial" / "final")


def test_a_named_policy_model_is_taken_as_it_is(tmp_path: Path) -> None:
    cfg = PipelineConfig.model_validate({"roles": {"policy": {"engine": "hf", "model": "some/model"}}})
    assert policy_role(cfg, tmp_path).model == "some/model"



def test_model_policy_means_the_rounds_policy_checkpoint_too(tmp_path: Path) -> None:
    RunDir(tmp_path).initial_checkpoint.mkdir(parents=True)
    cfg = PipelineConfig.model_validate({"roles": {"policy": {"engine": "hf", "model": "policy"}}})
    assert policy_role(cfg, tmp_path).model == str(RunDir(tmp_path).initial_checkpoint)
