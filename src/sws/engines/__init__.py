"""LLM inference behind one protocol; `make_engine` picks an engine by name and wraps it in the request cache.

Engine modules are imported only when chosen, so `vllm` or `openai` need not be installed to use the others.
Every engine class is constructed as `Cls(cfg: EngineConfig)` and has a static `check_config(cfg)` for the
checks that need no model and no server (options, model folder, API key variable): `make_engine` runs those at
once, while the engine itself is built on the first request the cache cannot answer (`sws.engines.lazy`).
Every engine is wrapped in `SampleFanOut`, which reads the common option `n_mode` (`sws.engines.fanout`).
"""

from __future__ import annotations

import importlib
from pathlib import Path

from sws.config import TEACHER_ROLES, EngineConfig, PipelineConfig, require_roles
from sws.engines.base import Completion, Engine, Request
from sws.engines.cache import CachedEngine, cache_identity
from sws.engines.fanout import SampleFanOut, read_n_mode
from sws.engines.lazy import LazyEngine
from sws.errors import UserError

__all__ = ["ENGINES", "CachedEngine", "Completion", "Engine", "Request", "initial_checkpoint", "make_engine", "role_config"]

ENGINES: dict[str, str] = {
    "hf": "sws.engines.hf:HFEngine",
    "openai": "sws.engines.openai:OpenAIEngine",
    "oracle": "sws.engines.oracle:OracleEngine",
    "vllm": "sws.engines.vllm:VllmEngine",
}


def initial_checkpoint(run_dir: Path) -> Path:
    """The policy a role with an empty `model` means: the run's initially trained checkpoint."""
    return Path(run_dir) / "train" / "initial" / "final"


def role_config(cfg: PipelineConfig, role: str) -> EngineConfig:
    """The engine config of a role named as in the pipeline YAML: `generator`, `policy`, `judges.1`, ..."""
    name, _, index = role.partition(".")
    roles = cfg.roles
    if name in TEACHER_ROLES:
        require_roles(cfg, [name], "the pipeline config")
    names = ["extractor", "generator", *(f"judges.{i}" for i in range(len(roles.judges or []))), "labeler",
             "policy"]
    if name == "judges" and index.isdigit() and int(index) < len(roles.judges):
        return roles.judges[int(index)]
    if name in ("extractor", "generator", "labeler", "policy") and not index:
        return getattr(roles, name)
    raise UserError(
        f"role '{role}' is not in the pipeline config (section 'roles'); "
        f"use one of: {', '.join(names)}"
    )


def make_engine(cfg: EngineConfig, run_dir: Path | None = None) -> Engine:
    """Build the engine `cfg.engine` names; with a run directory, behind the cache at `<run>/cache/requests.sqlite`.

    Unknown engine names, bad options and missing model folders raise UserError here, before any stage writes;
    with a run directory, the engine is built (model loaded, server checked) only when the cache cannot answer.
    """
    if cfg.engine not in ENGINES:
        raise UserError(
            f"engine '{cfg.engine}' is not known (field 'engine' of a role in the pipeline config); "
            f"use one of: {', '.join(sorted(ENGINES))}"
        )
    if not cfg.model and run_dir is not None:
        cfg = cfg.model_copy(update={"model": str(initial_checkpoint(run_dir))})
    mode = read_n_mode(cfg.options)
    engine_cfg = cfg.model_copy(update={"options": {k: v for k, v in cfg.options.items() if k != "n_mode"}})
    module_name, class_name = ENGINES[cfg.engine].split(":")
    engine_class = getattr(importlib.import_module(module_name), class_name)
    engine_class.check_config(engine_cfg)

    def build() -> Engine:
        return SampleFanOut(engine_class(engine_cfg), mode)

    if run_dir is None:
        return build()
    lazy = LazyEngine(build, cfg.engine, cfg.model)
    return CachedEngine(lazy, Path(run_dir) / "cache" / "requests.sqlite", cache_identity(cfg))
