"""The co-training `Learner` on a Tinker-API server (the hosted service, or a self-hosted compatible one such
as SkyRL's, which serves several LoRA adapters on one base model): the loop runs the same algorithm as with the
local torch learner.

Same algorithm means the same per-token loss. The local learner minimises TRL's default GRPO loss: the clipped
surrogate (epsilon 0.2) against the current policy's own detached log-probabilities, summed over the batch's
completion tokens and divided by their count. Here the server's `ppo` loss (the same clipped surrogate, summed
over tokens) gets each completion token's advantage divided by that count, and the "sampling" log-probabilities
are the trainer's own, from a `forward` pass just before, as the local learner's are. The server scores tokens
at temperature 1, so training a policy sampled at another temperature is refused rather than silently changed.

The client retries a failing or silent server for minutes (five for session setup, without end for a result
being polled) and takes no retry or timeout options, so every wait here has a deadline of its own, and any
failure ends as one `UserError` line naming the server and the fix, with the key redacted.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sws.atomic_files import write_json
from sws.cotrain.learner import Completion, SamplingSettings, ScoredCompletion
from sws.errors import UserError
from sws.secrets import redact, remember_secret

if TYPE_CHECKING:
    from sws.cotrain.backend import CotrainBackendConfig, TinkerPolicyConfig

TINKER_LOSS = "ppo"
CLIP_EPSILON = 0.2  # the local loss's epsilon (TRL's default), as Tinker's ratio thresholds 1 ± epsilon
STATE_FILE = "tinker_state.json"
CONNECT_TIMEOUT_S = 600.0  # session, adapter and first sampler (the hosted service may queue the adapter)
REQUEST_TIMEOUT_S = 3600.0  # one request's result


@dataclass(frozen=True)
class TokenizedCompletion:
    """One scored completion laid out as a next-token-prediction datum: position i of `input_tokens` predicts
    `target_tokens[i]`; `mask` is 1 on completion targets."""
    input_tokens: list[int]
    target_tokens: list[int]
    mask: list[float]
    advantage: float


def prompt_tokens(tokenizer: Any, prompt: str, settings: SamplingSettings, chat: bool) -> list[int]:
    """The prompt as the policy reads it, for sampling and training alike: with `chat`, the system prompt and the
    prompt as the user's message in the tokenizer's chat template, ready for the assistant's reply; without, the
    local learner's plain text (system prompt + prompt)."""
    if not chat:
        return tokenizer(settings.system_prompt + prompt, add_special_tokens=False)["input_ids"]
    messages = ([{"role": "system", "content": settings.system_prompt}] if settings.system_prompt else []) + [
        {"role": "user", "content": prompt}]
    text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def tokenize_batch(tokenizer: Any, batch: Sequence[ScoredCompletion], settings: SamplingSettings, chat: bool
                   ) -> list[TokenizedCompletion]:
    """The prompt (`prompt_tokens`), then the completion and EOS, shifted."""
    rows = []
    for item in batch:
        prompt = prompt_tokens(tokenizer, item.completion.prompt, settings, chat)
        completion = tokenizer(item.completion.text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        sequence = prompt + completion
        mask = [0.0] * (len(prompt) - 1) + [1.0] * len(completion)
        rows.append(TokenizedCompletion(sequence[:-1], sequence[1:], mask, item.advantage))
    return rows


def token_advantages(rows: Sequence[TokenizedCompletion]) -> list[list[float]]:
    """Each completion token's share of the batch loss: its sequence's advantage over the batch's completion
    token count (the local loss's normalisation), 0 on prompt tokens."""
    completion_tokens = max(sum(sum(row.mask) for row in rows), 1.0)
    return [[weight * row.advantage / completion_tokens for weight in row.mask] for row in rows]


def _client_errors() -> tuple[type[BaseException], ...]:
    """What the client raises for a server that failed: its own errors, a result's ValueError, a deadline."""
    return _tinker().TinkerError, ValueError, TimeoutError


def _failure(error: BaseException, server: str, what: str, timeout_s: float, key_env: str) -> UserError:
    """One line for a failed call to the server: what failed, the HTTP status or the client's reason, the fix."""
    status = getattr(error, "status_code", None)
    if isinstance(error, TimeoutError):
        reason = f"no result within {timeout_s:g} s (the client retries errors and silence)"
    elif status is not None:
        reason = f"HTTP {status}"
    else:
        reason = (str(error).splitlines() or [type(error).__name__])[0][:200]
    if status in (401, 403) or "api_key" in reason:
        fix = f"check the key in ${key_env} (a Tinker key starts with tml-)"
    else:
        fix = "check that the server is up and speaks the Tinker API (cotrain.<role>.base_url), then rerun"
    return UserError(redact(f"the Tinker server {server} failed to {what}: {reason}; fix: {fix}"))


def _tinker() -> Any:
    try:
        import tinker
    except ImportError:
        raise UserError("cotrain.backend is tinker but the `tinker` package is not installed; "
                        "fix: pip install 'sws[tinker]'") from None
    return tinker


class TinkerLearner:
    """One policy (a LoRA adapter) on a Tinker-API server, driven through the official client."""

    def __init__(self, training_client: Any, tokenizer: Any, learning_rate: float, name: str, *,
                 chat_template: bool, server: str = "", timeout_s: float | None = None,
                 key_env: str = "TINKER_API_KEY", service: Any = None) -> None:
        if chat_template and tokenizer.chat_template is None:
            raise UserError(f"the {name}'s tokenizer has no chat template (cotrain.{name}.chat_template is "
                            f"true); fix: set cotrain.{name}.chat_template: false for a base model's plain-text "
                            "prompts")
        self.chat_template = chat_template
        self.training_client = training_client
        self.service = service  # the client's session (None: the caller owns it)
        self.tokenizer = tokenizer
        self.learning_rate = learning_rate
        self.name = name
        self.server = server
        self.key_env = key_env
        self.timeout_s = REQUEST_TIMEOUT_S if timeout_s is None else timeout_s
        self.version = 0
        self.sampler = self._wait(training_client.save_weights_and_get_sampling_client(), "publish the weights")

    def _wait(self, future: Any, what: str) -> Any:
        try:
            return future.result(timeout=self.timeout_s)
        except _client_errors() as error:
            raise _failure(error, self.server, f"{what} for {self.name}", self.timeout_s, self.key_env) from None

    def _model_input(self, tokens: list[int]) -> Any:
        return _tinker().types.ModelInput.from_ints(tokens)

    def sample(self, prompts: Sequence[str], n: int, settings: SamplingSettings) -> list[list[Completion]]:
        types = _tinker().types
        params = types.SamplingParams(max_tokens=settings.max_new_tokens, temperature=settings.temperature,
                                      stop=[self.tokenizer.eos_token_id])
        futures = [self.sampler.sample(
            prompt=self._model_input(prompt_tokens(self.tokenizer, prompt, settings, self.chat_template)),
            num_samples=n, sampling_params=params) for prompt in prompts]
        return [[Completion(prompt, self.tokenizer.decode(sequence.tokens, skip_special_tokens=True),
                            len(sequence.tokens))
                 for sequence in self._wait(future, "sample").sequences]
                for prompt, future in zip(prompts, futures, strict=True)]

    def datums(self, rows: Sequence[TokenizedCompletion], old_logprobs: Sequence[Sequence[float]] | None
               ) -> list[Any]:
        """The requests' datums: targets and mask for the `forward` pass (old_logprobs None), targets,
        old log-probabilities and per-token advantages for the `ppo` pass."""
        types = _tinker().types
        if old_logprobs is None:
            return [types.Datum(model_input=self._model_input(row.input_tokens),
                                loss_fn_inputs={"target_tokens": row.target_tokens, "weights": row.mask})
                    for row in rows]
        return [types.Datum(model_input=self._model_input(row.input_tokens),
                            loss_fn_inputs={"target_tokens": row.target_tokens, "logprobs": list(logprobs),
                                            "advantages": advantages})
                for row, logprobs, advantages in zip(rows, old_logprobs, token_advantages(rows), strict=True)]

    def forward_backward(self, batch: Sequence[ScoredCompletion], settings: SamplingSettings) -> float:
        if not batch:
            return 0.0
        if settings.temperature != 1.0:
            raise UserError(f"the tinker backend scores tokens at temperature 1 but {self.name} samples "
                            f"at {settings.temperature}; fix: set its temperature to 1.0 or use backend local")
        rows = tokenize_batch(self.tokenizer, batch, settings, self.chat_template)
        forward = self._wait(self.training_client.forward(self.datums(rows, None), loss_fn="cross_entropy"),
                             "score the batch")
        old_logprobs = [output["logprobs"].tolist() for output in forward.loss_fn_outputs]
        result = self._wait(self.training_client.forward_backward(
            self.datums(rows, old_logprobs), loss_fn=TINKER_LOSS,
            loss_fn_config={"clip_low_threshold": 1 - CLIP_EPSILON, "clip_high_threshold": 1 + CLIP_EPSILON},
        ), "compute the gradient")
        return float(result.metrics["loss:sum"])

    def optim_step(self) -> None:
        # torch.optim.AdamW's defaults and the local learner's gradient clipping and zero weight decay
        adam = _tinker().types.AdamParams(learning_rate=self.learning_rate, beta1=0.9, beta2=0.999, eps=1e-8,
                                          weight_decay=0.0, grad_clip_norm=1.0)
        self._wait(self.training_client.optim_step(adam), "take the optimizer step")
        self.version += 1

    def sync_weights(self) -> None:
        self.sampler = self._wait(self.training_client.save_weights_and_get_sampling_client(), "publish the weights")

    def save(self, folder: Path) -> None:
        """The server keeps weights and optimizer state; the folder keeps their address and the version. A step
        redone after a kill saves under the same name, replacing the state it lost."""
        saved = self._wait(self.training_client.save_state(name=f"{self.name}-{self.version:06d}", overwrite=True),
                           "save the state")
        folder.mkdir(parents=True, exist_ok=True)
        write_json(folder / STATE_FILE, {"state_path": saved.path, "version": self.version})

    def load(self, folder: Path) -> None:
        state = json.loads((folder / STATE_FILE).read_text())
        self._wait(self.training_client.load_state_with_optimizer(state["state_path"]), "load the state")
        self.version = state["version"]
        self.sync_weights()

    def close(self, succeeded: bool) -> None:
        """Finish the session, which stops the client's heartbeat threads (the saved states stay on the server).
        After a failure the finish is sent without waiting, so that the failure is what the user sees."""
        if self.service is None:
            return
        finished = self.service.close("success" if succeeded else "errored")
        if succeeded:
            self._wait(finished, "finish the session")


def connect(backend: CotrainBackendConfig, policy: TinkerPolicyConfig, learning_rate: float, name: str,
            seed: int) -> TinkerLearner:
    """A learner for one policy: a fresh LoRA adapter on the policy's server. The client sets up its session
    synchronously, retrying for minutes, so that runs on a thread that is abandoned after CONNECT_TIMEOUT_S."""
    tinker = _tinker()
    key = backend.api_key()
    remember_secret(key)
    server = policy.base_url or "(the hosted service)"
    outcome: dict[str, Any] = {}

    def create() -> None:
        try:
            service = tinker.ServiceClient(base_url=policy.base_url, api_key=key)
            training_client = service.create_lora_training_client(
                base_model=policy.base_model, rank=policy.lora_rank, seed=seed).result(timeout=CONNECT_TIMEOUT_S)
            try:
                outcome["learner"] = TinkerLearner(training_client, training_client.get_tokenizer(), learning_rate,
                                                   name, server=server, key_env=backend.api_key_env,
                                                   service=service, chat_template=policy.chat_template)
            except UserError:
                service.close("errored")  # not awaited: the setting's error is what the user sees
                raise
        except BaseException as error:  # noqa: BLE001 - handed to the caller's thread
            outcome["error"] = error

    thread = threading.Thread(target=create, name=f"tinker-connect-{name}", daemon=True)
    thread.start()
    thread.join(CONNECT_TIMEOUT_S)
    what = f"create the {name}'s LoRA adapter on {policy.base_model}"
    if thread.is_alive():
        raise _failure(TimeoutError(), server, what, CONNECT_TIMEOUT_S, backend.api_key_env)
    error = outcome.get("error")
    if isinstance(error, _client_errors()):
        raise _failure(error, server, what, CONNECT_TIMEOUT_S, backend.api_key_env) from None
    if error is not None:
        raise error
    return outcome["learner"]
