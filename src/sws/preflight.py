"""Checks that need no model, run before a command's first stage: the roles its stages call, the files its
settings name and, on Ray, the cluster. A mistake found here costs nothing; found after extract, it would cost
every call before."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from sws import held_out
from sws.config import PipelineConfig, require_roles
from sws.errors import UserError
from sws.stage import Stage, all_stages

# Settings naming files that a command reads only after model calls (its first stage checks the others).
COMMAND_FILES = {
    "synthesize": ("synthesize.reference_files", "synthesize.prompt_dir"),
    "run": ("synthesize.reference_files", "synthesize.prompt_dir"),
}


def _setting(cfg: PipelineConfig, dotted: str) -> object:
    node: object = cfg
    for key in dotted.split("."):
        node = getattr(node, key)
    return node


def check_files(cfg: PipelineConfig, command: str, source: Path | str) -> None:
    for dotted in COMMAND_FILES.get(command, ()):
        value = _setting(cfg, dotted)
        for path in value if isinstance(value, list) else [value]:
            if path is not None and not Path(path).exists():
                raise UserError(f"{source}: field '{dotted}' names {path}, which does not exist; fix the path")


def check_executor(cfg: PipelineConfig, command: str) -> None:
    """On Ray: the cluster answers, and has the GPUs each role asks for (`executor.roles.<role>.gpus`)."""
    uses_executor = command == "run" or any(stage.uses_executor for stage in all_stages() if stage.name == command)
    if cfg.executor.kind != "ray" or not uses_executor:
        return
    from sws.executors.ray_cluster import check_gpus, connect

    connect(cfg.executor.address)
    for role, resources in cfg.executor.roles.items():
        check_gpus(role, resources.gpus)


def check_role_engines(cfg: PipelineConfig, roles: Iterable[str]) -> None:
    """Each role's engine name and options, model folder and API key variable, as its first call would check
    them: found here, a mistake costs nothing; found at the role's step, it costs every call before."""
    from sws.engines import check_engine

    for role in roles:
        value = getattr(cfg.roles, role)
        for engine in value if isinstance(value, list) else [value]:
            check_engine(engine)


def check_cost_cap(cfg: PipelineConfig, roles: Iterable[str], source: Path | str) -> None:
    """`synthesize.max_cost` counts priced tokens only, so a cap without a price for any role would never stop."""
    if cfg.synthesize.max_cost is not None and not any(role in cfg.pricing for role in roles or cfg.pricing):
        raise UserError(f"{source}: field 'synthesize.max_cost' is set but 'pricing' prices none of the synthesis "
                        "roles, so the cap would never be reached; add e.g. `pricing: {generator: {input: 0.5, "
                        "output: 1.5}}` or use synthesize.max_tokens")


def check(cfg: PipelineConfig, command: str, source: Path | str, stages: Iterable[Stage] = ()) -> None:
    """Everything `command` (running `stages`) needs that can be checked without a model."""
    roles = [role for stage in stages if stage.is_on(cfg) for role in stage.roles_for(cfg)]
    require_roles(cfg, roles, source)
    check_role_engines(cfg, roles)
    check_files(cfg, command, source)
    if command in ("synthesize", "run"):
        check_cost_cap(cfg, roles, source)
    if command in ("eval", "run"):
        held_out.check_settings(cfg, source)
    check_executor(cfg, command)
