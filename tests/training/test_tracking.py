import importlib.util

import pytest

from sws.errors import UserError
from sws.training.tracking import require_tracker, tracking_dir, tracking_environment


def test_each_tracker_writes_into_the_arms_folder(tmp_path):
    folder = str(tracking_dir(tmp_path / "train" / "augmented").absolute())

    assert tracking_environment("none", tmp_path) == {}
    assert tracking_environment("tensorboard", tmp_path / "train" / "augmented") == {
        "TENSORBOARD_LOGGING_DIR": folder, "TENSORBOARD_DIR": folder}
    assert tracking_environment("wandb", tmp_path / "train" / "augmented")["WANDB_DIR"] == folder
    assert tracking_environment("mlflow", tmp_path / "train" / "augmented")["MLFLOW_TRACKING_URI"].startswith(
        "file://" + folder)


def test_a_missing_tracker_is_one_line_with_the_install_hint(monkeypatch, tmp_path):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)

    with pytest.raises(UserError, match=r"config.yaml: field 'train.report_to' is 'mlflow', but mlflow is not "
                                        r"installed; install it \(pip install 'sws-rlvr\[mlflow\]'\)"):
        require_tracker("mlflow", tmp_path / "config.yaml")
    require_tracker("none", tmp_path / "config.yaml")
