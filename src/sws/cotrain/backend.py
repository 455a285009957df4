"""Which engine trains the two co-trained policies: this process (`local`) or a Tinker-API server (`tinker`),
and the learner it gives each policy.

The API key is read from the environment only and never stored in a config, a run folder or a record.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

if TYPE_CHECKING:
    from sws.cotrain.learner import Learner

Role = Literal["synthesizer", "reasoner"]


class TinkerPolicyConfig(BaseModel):
    """One policy on a Tinker-API server: a LoRA adapter on `base_model`."""
    model_config = ConfigDict(extra="forbid")

    # None: the hosted service's default address; a self-hosted Tinker-compatible server's URL otherwise.
    base_url: str | None = None
    base_model: str = Field(min_length=1, description="The base model the adapter trains on (a Hugging Face name).")
    lora_rank: int = Field(32, ge=1, description="The LoRA adapter's rank.")
    tokenizer: str | None = Field(None, description=(
        "The base model's tokenizer: a local folder or a Hugging Face name; empty: the one the server names "
        "(loaded from the Hugging Face hub)."))
    chat_template: bool = Field(True, description=(
        "Give the policy its prompts in the tokenizer's chat template (the system prompt, then the prompt as the "
        "user's message), as an instruct model expects; false: plain text (system prompt + prompt), for a base "
        "model."))


class CotrainBackendConfig(BaseModel):
    """`cotrain.backend` and, for `tinker`, where each policy trains."""
    model_config = ConfigDict(extra="forbid")

    backend: Literal["local", "tinker"] = Field(
        "local", description="Where the two policies train: `local` in this process, `tinker` on a Tinker-API server.")
    synthesizer: TinkerPolicyConfig | None = Field(None, description="The synthesizer's server (backend tinker).")
    reasoner: TinkerPolicyConfig | None = Field(None, description="The reasoner's server (backend tinker).")
    api_key_env: str = Field("TINKER_API_KEY", min_length=1, description=(
        "The environment variable holding the Tinker API key (its value never enters the config)."))
    call_deadline_s: float = Field(30.0, gt=0, description=(
        "How long one call to a Tinker server with a small request is waited for, in seconds; past it the "
        "run ends in one line, keeping the steps done (the client itself retries errors and silence without "
        "end)."))
    call_deadline_tokens_per_s: float = Field(1000.0, gt=0, description=(
        "The slowest rate, in tokens per second, a large call is waited for: a call's deadline is "
        "call_deadline_s plus the tokens it sends and asks to sample over this rate."))

    @model_validator(mode="after")
    def _tinker_names_both_policies(self) -> CotrainBackendConfig:
        if self.backend == "tinker" and (self.synthesizer is None or self.reasoner is None):
            raise ValueError("cotrain.backend tinker needs cotrain.synthesizer and cotrain.reasoner "
                             "(base_model each; base_url for a self-hosted server)")
        return self

    def api_key(self) -> str:
        """The key from the environment; a one-line UserError naming the variable when it is unset."""
        from sws.errors import UserError
        key = os.environ.get(self.api_key_env, "")
        if not key:
            raise UserError(f"cotrain.backend is tinker but ${self.api_key_env} is empty; "
                            f"fix: export {self.api_key_env}=<your key> (it is read from the environment only)")
        return key


def make_learner(backend: CotrainBackendConfig, role: Role, local_folder: Path | None, learning_rate: float,
                 seed: int) -> Learner:
    """The learner for one policy: trained in this process from `local_folder`, or a fresh LoRA adapter on the
    role's Tinker-API server (`local_folder` unused there: the server loads `base_model`)."""
    if backend.backend == "local":
        from sws.cotrain.learner import TorchLearner
        assert local_folder is not None  # the stage builds both local policies
        return TorchLearner(local_folder, learning_rate, seed)
    from sws.cotrain.tinker_learner import connect
    policy = backend.synthesizer if role == "synthesizer" else backend.reasoner
    assert policy is not None  # the validator requires both for tinker
    return connect(backend, policy, learning_rate, role, seed)
