"""Which model a role names when it names the policy: `model: policy` (any role) or an empty `roles.policy.model`
means the policy the current round starts from, the run directory's initial checkpoint. In round 1 that is the
initially trained policy; in a later round of `sws run --rounds N` it is the round before's augmented policy
(see `sws.rounds`), so the policy can play every teacher role (self-evolving SwS)."""

from __future__ import annotations

from pathlib import Path

from sws.config import EngineConfig
from sws.errors import UserError
from sws.run_dir import RunDir

POLICY_MODEL = "policy"


def names_policy(role: EngineConfig) -> bool:
    return role.model == POLICY_MODEL


def current_policy(run_dir: Path, field: str, why: str) -> Path:
    """The round's policy checkpoint, which must exist; `field` is the setting that asked for it, `why` says how."""
    checkpoint = RunDir(run_dir).initial_checkpoint
    if not checkpoint.is_dir():
        raise UserError(f"{checkpoint}: not found ({why} means this checkpoint); "
                        f"run `sws train initial --run {run_dir}` first or set {field}")
    return checkpoint


def resolved(role: EngineConfig, run_dir: Path, field: str = "roles.*.model") -> EngineConfig:
    """`role` with `model: policy` replaced by the round's policy checkpoint; any other role as it is."""
    if not names_policy(role):
        return role
    checkpoint = current_policy(run_dir, field, f"{field}: {POLICY_MODEL}")
    return role.model_copy(update={"model": str(checkpoint)})
