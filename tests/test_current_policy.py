"""`model: policy`: the round's policy checkpoint, for any role."""

from pathlib import Path

import pytest

from sws.config import EngineConfig
from sws.current_policy import resolved
from sws.errors import UserError
from sws.run_dir import RunDir


def test_model_policy_names_the_rounds_policy_for_any_role(tmp_path: Path) -> None:
    judge = EngineConfig(engine="hf", model="policy", temperature=0.0)
    with pytest.raises(UserError, match=r"roles.judges.model: policy means this checkpoint"):
        resolved(judge, tmp_path, "roles.judges.model")
    RunDir(tmp_path).initial_checkpoint.mkdir(parents=True)
    assert resolved(judge, tmp_path).model == str(RunDir(tmp_path).initial_checkpoint)
    assert resolved(judge, tmp_path).temperature == 0.0
    named = EngineConfig(engine="hf", model="some/model")
    assert resolved(named, tmp_path) is named
