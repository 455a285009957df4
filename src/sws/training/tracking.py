"""Experiment tracking (`train.report_to`): which tracker a trainer logs to, and where its files go.

Each tracker writes under the arm's folder, `<run>/train/<arm>/tracking/`, through the environment variables TRL
(transformers' callbacks) and verl read; wandb runs offline unless the user has set `WANDB_MODE` themselves.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

from sws.errors import UserError

TRACKERS = ("tensorboard", "wandb", "mlflow")
# The module each tracker needs; transformers' and verl's tensorboard writers are torch's, which needs tensorboard.
_MODULES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow"}


def tracking_dir(out_dir: Path) -> Path:
    return out_dir / "tracking"


def tracking_environment(report_to: str, out_dir: Path) -> dict[str, str]:
    """The environment variables that send `report_to`'s files into the arm's folder (empty for `none`)."""
    folder = str(tracking_dir(out_dir).absolute())
    if report_to == "tensorboard":
        # TENSORBOARD_LOGGING_DIR: transformers' callback; TENSORBOARD_DIR: verl's tracker.
        return {"TENSORBOARD_LOGGING_DIR": folder, "TENSORBOARD_DIR": folder}
    if report_to == "wandb":
        return {"WANDB_DIR": folder, "WANDB_MODE": os.environ.get("WANDB_MODE", "offline"),
                "WANDB_PROJECT": os.environ.get("WANDB_PROJECT", "sws")}
    if report_to == "mlflow":
        return {"MLFLOW_TRACKING_URI": os.environ.get("MLFLOW_TRACKING_URI", Path(folder, "mlruns").as_uri())}
    return {}


def require_tracker(report_to: str, config_file: Path) -> None:
    """UserError, before anything is written, when the tracker `report_to` names is not installed."""
    module = _MODULES.get(report_to)
    if module is not None and importlib.util.find_spec(module) is None:
        raise UserError(f"{config_file}: field 'train.report_to' is '{report_to}', but {module} is not installed; "
                        f"install it (pip install 'sws-rlvr[{report_to}]') or set train.report_to: none")


@contextlib.contextmanager
def tracking_variables(report_to: str, out_dir: Path) -> Iterator[None]:
    """Set `report_to`'s variables for an in-process training run, restoring the environment afterwards."""
    variables = tracking_environment(report_to, out_dir)
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
