"""LLM inference behind one protocol; `make_engine` picks an engine by name and wraps it in the request cache.

Engine modules are imported only when chosen, so `vllm` or `openai` need not be installed to use the others.
Every engine subclasses `sws.engines.base.EngineBase`: it is constructed as `Cls(cfg: EngineConfig)` and has a
class method `check_config(cfg)` for the checks that need no model and no server (options, model folder, API
key variable): `make_engine` runs those at once, while the engine itself is built on the first request the
cache cannot answer (`sws.engines.lazy`). Every engine is wrapped in `SampleFanOut`, which reads the common
option `n_mode` (`sws.engines.fanout`). A world may bring engines of its own (the arith world's oracle); they
are found through the world registry.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from sws.config import EngineConfig
from sws.engines.base import Completion, Engine, Request
from sws.engines.cache import CachedEngine, cache_identity
from sws.engines.fanout import SampleFanOut, read_n_mode
from sws.engines.lazy import LazyEngine
from sws.errors import UserError
from sws.world import all_worlds

__all__ = ["ENGINES", "CachedEngine", "Completion", "Engine", "Request", "check_engine", "engine_class", "make_engine"]

ENGINES: dict[str, str] = {
    "hf": "sws.engines.hf:HFEngine",
    "openai": "sws.engines.openai:OpenAIEngine",
    "vllm": "sws.engines.vllm:VllmEngine",
}


def engine_class(name: str) -> type[Engine]:
    """The class of engine `name`: a generic one, or one a world brings."""
    known = {**ENGINES, **{engine: path for world in all_worlds() for engine, path in world.engines.items()}}
    if name not in known:
        raise UserError(
            f"engine '{name}' is not known (field 'engine' of a role in the pipeline config); "
            f"use one of: {', '.join(sorted(known))}"
        )
    if not isinstance(known[name], str):
        return known[name]
    module_name, class_name = known[name].split(":")
    return getattr(importlib.import_module(module_name), class_name)


def check_engine(cfg: EngineConfig) -> tuple[type[Engine], EngineConfig, str]:
    """The checks that need no model and no server (engine name, options, model folder, API key variable):
    the engine's class, its config without the common option `n_mode`, and that mode."""
    mode = read_n_mode(cfg.options)
    engine_cfg = cfg.model_copy(update={"options": {k: v for k, v in cfg.options.items() if k != "n_mode"}})
    cls = engine_class(cfg.engine)
    cls.check_config(engine_cfg)
    return cls, engine_cfg, mode


def make_engine(cfg: EngineConfig, cache: Path | None = None) -> Engine:
    """Build the engine `cfg.engine` names; with a `cache` file, behind that request cache.

    Unknown engine names, bad options and missing model folders raise UserError here, before any stage writes;
    with a cache, the engine is built (model loaded, server checked) only when the cache cannot answer.
    """
    cls, engine_cfg, mode = check_engine(cfg)

    def build() -> Engine:
        return SampleFanOut(cls(engine_cfg), mode)

    if cache is None:
        return build()
    lazy = LazyEngine(build, cfg.engine, cfg.model)
    return CachedEngine(lazy, Path(cache), cache_identity(cfg))
