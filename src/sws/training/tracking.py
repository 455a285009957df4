"""Experiment tracking (`train.report_to`): which tracker a trainer logs to, and where its files go.

Each tracker writes under the arm's folder, `<run>/train/<arm>/tracking/`, through the environment variables TRL
(transformers' callbacks) and verl read; wandb runs offline unless the user has set `WANDB_MODE` themselves. The
co-training loop, which has no trainer of its own, logs each step's metrics through `step_logger` into
`<run>/cotrain/<arm>/tracking/`.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol

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


class StepLogger(Protocol):
    def log(self, metrics: Mapping[str, Any], step: int) -> None: ...

    def close(self) -> None: ...


def scalars(metrics: Mapping[str, Any]) -> dict[str, float]:
    """The metrics a tracker plots: numbers, not lists or missing values."""
    return {name: float(value) for name, value in metrics.items()
            if isinstance(value, int | float) and not isinstance(value, bool)}


class _TensorBoard:
    def __init__(self, folder: Path) -> None:
        from torch.utils.tensorboard import SummaryWriter

        self.writer = SummaryWriter(log_dir=str(folder))

    def log(self, metrics: Mapping[str, Any], step: int) -> None:
        for name, value in scalars(metrics).items():
            self.writer.add_scalar(name, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class _Wandb:
    def __init__(self, folder: Path, name: str) -> None:
        import wandb

        variables = tracking_environment("wandb", folder.parent)
        self.run = wandb.init(dir=variables["WANDB_DIR"], mode=variables["WANDB_MODE"],
                              project=variables["WANDB_PROJECT"], name=name)

    def log(self, metrics: Mapping[str, Any], step: int) -> None:
        self.run.log(scalars(metrics), step=step)

    def close(self) -> None:
        self.run.finish()


class _Mlflow:
    def __init__(self, folder: Path, name: str) -> None:
        import mlflow

        mlflow.set_tracking_uri(tracking_environment("mlflow", folder.parent)["MLFLOW_TRACKING_URI"])
        self.mlflow = mlflow
        self.run = mlflow.start_run(run_name=name)

    def log(self, metrics: Mapping[str, Any], step: int) -> None:
        self.mlflow.log_metrics(scalars(metrics), step=step)

    def close(self) -> None:
        self.mlflow.end_run()


def step_logger(report_to: str, out_dir: Path, name: str) -> StepLogger | None:
    """A logger of per-step metrics into `out_dir`'s tracking folder for a loop without a trainer; None for
    `none`."""
    folder = tracking_dir(out_dir)
    if report_to == "tensorboard":
        return _TensorBoard(folder)
    if report_to == "wandb":
        return _Wandb(folder, name)
    if report_to == "mlflow":
        return _Mlflow(folder, name)
    return None
