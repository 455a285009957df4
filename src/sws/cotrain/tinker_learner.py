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
being polled) and takes no retry or timeout options, so every call here has a deadline of its own
(`CallDeadline`), every reply is checked before it is used (`sws.cotrain.tinker_replies`), and any failure
ends as one `UserError` line naming the server, the call, what went wrong and the fix, with the key redacted.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transformers import AutoTokenizer

from sws.atomic_files import write_json
from sws.cotrain.daemon_call import DaemonCall
from sws.cotrain.learner import Completion, SamplingSettings, ScoredCompletion
from sws.cotrain.tinker_replies import MalformedReply, forward_logprobs, loss_sum, sampled_tokens, state_path
from sws.errors import UserError
from sws.secrets import redact, remember_secret

if TYPE_CHECKING:
    from sws.cotrain.backend import CotrainBackendConfig, TinkerPolicyConfig

TINKER_LOSS = "ppo"
CLIP_EPSILON = 0.2  # the local loss's epsilon (TRL's default), as Tinker's ratio thresholds 1 ± epsilon
STATE_FILE = "tinker_state.json"


@dataclass(frozen=True)
class CallDeadline:
    """How long one call to the server is waited for: `small_s`, plus the tokens it sends and asks to sample
    at `tokens_per_s` (`cotrain.call_deadline_s`, `cotrain.call_deadline_tokens_per_s`)."""
    small_s: float
    tokens_per_s: float

    @classmethod
    def of(cls, backend: CotrainBackendConfig) -> CallDeadline:
        return cls(backend.call_deadline_s, backend.call_deadline_tokens_per_s)

    def seconds(self, tokens: int = 0) -> float:
        return self.small_s + tokens / self.tokens_per_s


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


def _first_line(error: BaseException) -> str:
    """The exception's type and the first line of its message (the client's and the hub's run to many)."""
    first = (str(error).splitlines() or [""])[0][:200]
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


def _failure(error: BaseException, server: str, what: str, role: str, deadline_s: float,
             key_env: str) -> UserError:
    """One line for a failed call to the server: what failed; the deadline, the HTTP status, what the reply
    lacked, the client's error or what it raised reading the reply; the fix."""
    status = getattr(error, "status_code", None)
    fix = f"check that the server is up and serves the Tinker API (cotrain.{role}.base_url)"
    if isinstance(error, TimeoutError):
        reason = f"no reply within {deadline_s:.1f} s (the client retries errors and silence)"
        fix += ("; for a slow or queueing server raise cotrain.call_deadline_s, or lower "
                "cotrain.call_deadline_tokens_per_s for large requests")
    elif isinstance(error, MalformedReply):
        reason = str(error)
        fix += f" and that cotrain.{role}.tokenizer is its model's tokenizer" if error.tokenizer else ""
    elif status is not None:
        reason = f"HTTP {status}"
    elif isinstance(error, (_tinker().TinkerError, OSError)):
        reason = _first_line(error)
    else:
        reason = f"the client could not read its reply ({_first_line(error)})"
    if status in (401, 403) or "api_key" in reason:
        fix = f"check the key in ${key_env} (a Tinker key starts with tml-)"
    return UserError(redact(f"the Tinker server {server} failed to {what}: {reason}; fix: {fix}, then rerun "
                            "(the steps done are kept)"))


def _tinker() -> Any:
    try:
        import tinker
    except ImportError:
        raise UserError("cotrain.backend is tinker but the `tinker` package is not installed; "
                        "fix: pip install 'sws[tinker]'") from None
    return tinker


def load_tokenizer(policy: TinkerPolicyConfig, training_client: Any, role: str) -> Any:
    """`cotrain.<role>.tokenizer`, else the one the server names; one line naming the setting when it cannot
    be loaded (offline, a name the hub does not know, a folder without one)."""
    try:
        if policy.tokenizer:
            return AutoTokenizer.from_pretrained(policy.tokenizer)
        return training_client.get_tokenizer()
    except Exception as error:  # noqa: BLE001 - the hub and transformers raise many kinds, all with this fix
        source = (repr(policy.tokenizer) if policy.tokenizer
                  else f"the tokenizer the server names for {policy.base_model}")
        raise UserError(f"cotrain.{role}.tokenizer: cannot load {source} ({_first_line(error)}); fix: set "
                        f"cotrain.{role}.tokenizer to a local folder holding {policy.base_model}'s "
                        "tokenizer, or to its Hugging Face name with the hub reachable") from None


class TinkerLearner:
    """One policy (a LoRA adapter) on a Tinker-API server, driven through the official client."""

    def __init__(self, training_client: Any, tokenizer: Any, learning_rate: float, name: str, *,
                 chat_template: bool, deadline: CallDeadline, server: str = "",
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
        self.deadline = deadline
        self.version = 0
        self.sampler = self._wait(training_client.save_weights_and_get_sampling_client(), "publish the weights")

    def _wait(self, future: Any, what: str, tokens: int = 0,
              check: Callable[[Any], Any] | None = None) -> Any:
        [reply] = self._wait_all([future], what, tokens, check)
        return reply

    def _wait_all(self, futures: Sequence[Any], what: str, tokens: int = 0,
                  check: Callable[[Any], Any] | None = None) -> list[Any]:
        """The replies of one call's futures, each through `check`, within the deadline for `tokens`."""
        deadline_s = self.deadline.seconds(tokens)
        end = time.monotonic() + deadline_s
        try:
            replies = [future.result(timeout=max(end - time.monotonic(), 0.0)) for future in futures]
            return [check(reply) for reply in replies] if check is not None else replies
        except Exception as error:  # noqa: BLE001 - the client raises anything for a reply it cannot read
            raise _failure(error, self.server, f"{what} for {self.name}", self.name, deadline_s,
                           self.key_env) from None

    def _model_input(self, tokens: list[int]) -> Any:
        return _tinker().types.ModelInput.from_ints(tokens)

    def sample(self, prompts: Sequence[str], n: int, settings: SamplingSettings) -> list[list[Completion]]:
        types = _tinker().types
        params = types.SamplingParams(max_tokens=settings.max_new_tokens, temperature=settings.temperature,
                                      stop=[self.tokenizer.eos_token_id])
        encoded = [prompt_tokens(self.tokenizer, prompt, settings, self.chat_template) for prompt in prompts]
        futures = [self.sampler.sample(prompt=self._model_input(tokens), num_samples=n,
                                       sampling_params=params) for tokens in encoded]
        asked = sum(len(tokens) + n * settings.max_new_tokens for tokens in encoded)
        vocabulary = len(self.tokenizer)
        samples = self._wait_all(futures, "sample", asked, lambda reply: sampled_tokens(reply, n, vocabulary))
        return [[Completion(prompt, self.tokenizer.decode(tokens, skip_special_tokens=True), len(tokens))
                 for tokens in group] for prompt, group in zip(prompts, samples, strict=True)]

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
        sent = sum(len(row.input_tokens) for row in rows)
        lengths = [len(row.target_tokens) for row in rows]
        forward = self.training_client.forward(self.datums(rows, None), loss_fn="cross_entropy")
        old_logprobs = self._wait(forward, "score the batch", sent,
                                  lambda reply: forward_logprobs(reply, lengths))
        return self._wait(self.training_client.forward_backward(
            self.datums(rows, old_logprobs), loss_fn=TINKER_LOSS,
            loss_fn_config={"clip_low_threshold": 1 - CLIP_EPSILON, "clip_high_threshold": 1 + CLIP_EPSILON},
        ), "compute the gradient", sent, loss_sum)

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
        saved = self.training_client.save_state(name=f"{self.name}-{self.version:06d}", overwrite=True)
        path = self._wait(saved, "save the state", check=state_path)
        folder.mkdir(parents=True, exist_ok=True)
        write_json(folder / STATE_FILE, {"state_path": path, "version": self.version})

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
    synchronously, retrying for minutes, so that runs on a daemon thread abandoned at the call's deadline."""
    tinker = _tinker()
    key = backend.api_key()
    remember_secret(key)
    server = policy.base_url or "(the hosted service)"
    deadline = CallDeadline.of(backend)

    def create() -> tuple[Any, Any]:
        service = tinker.ServiceClient(base_url=policy.base_url, api_key=key)
        return service, service.create_lora_training_client(
            base_model=policy.base_model, rank=policy.lora_rank, seed=seed).result(timeout=deadline.seconds())

    try:
        service, training_client = DaemonCall(create, f"tinker-connect-{name}").result(deadline.seconds())
    except Exception as error:  # noqa: BLE001 - the client raises anything for a server it cannot use
        raise _failure(error, server, f"create the {name}'s LoRA adapter on {policy.base_model}", name,
                       deadline.seconds(), backend.api_key_env) from None
    try:
        tokenizer = load_tokenizer(policy, training_client, name)
        return TinkerLearner(training_client, tokenizer, learning_rate, name,
                             chat_template=policy.chat_template, deadline=deadline, server=server,
                             key_env=backend.api_key_env, service=service)
    except BaseException:
        service.close("errored")  # not awaited: the first error is what the user sees
        raise
