"""The engine protocol: a batch of requests in, `n` completions per request out, in order."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from sws.errors import UserError


@dataclass(frozen=True)
class Request:
    """One generation request: chat `messages` or a raw `prompt`, sampling settings, and metadata.

    `task` and `fields` (the prompt template's inputs) are metadata: real engines ignore them, the arith oracle
    reads them. They are not part of the cache key, which depends only on what a real model would see.
    """

    messages: tuple[dict[str, str], ...] | None = None
    prompt: str | None = None
    n: int = 1
    temperature: float = 1.0
    top_p: float = 1.0
    max_tokens: int = 512
    stop: tuple[str, ...] = ()
    seed: int | None = None
    task: str = ""
    fields: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if (self.messages is None) == (self.prompt is None):
            raise ValueError("a Request needs exactly one of messages or prompt")
        if self.messages is not None and not isinstance(self.messages, tuple):
            object.__setattr__(self, "messages", tuple(self.messages))
        if not isinstance(self.stop, tuple):
            object.__setattr__(self, "stop", tuple(self.stop))

    def sampling(self) -> dict[str, Any]:
        """The settings that, with the input, decide what a model returns."""
        return {
            "n": self.n, "temperature": self.temperature, "top_p": self.top_p,
            "max_tokens": self.max_tokens, "stop": list(self.stop), "seed": self.seed,
        }


# Why a completion ended, as OpenAI-compatible servers and vLLM report it: "stop" (end of sequence or a stop
# string) or "length" (it hit max_tokens). A cut-off output is never taken as finished.
FINISHED = "stop"
CUT_OFF = "length"


@dataclass(frozen=True)
class Completion:
    """A sample: its text, its completion tokens, why it ended, and the prompt tokens its model call billed.

    One model call bills its prompt once however many samples it returns, so the first completion of a call
    carries the call's prompt tokens and the others 0: summing `prompt_tokens` over completions gives the prompt
    tokens billed (a fanned-out request makes one call per sample, and each sample carries its own).
    """

    text: str
    tokens: int = 0
    finish_reason: str = FINISHED
    prompt_tokens: int = 0

    @property
    def truncated(self) -> bool:
        return self.finish_reason == CUT_OFF


def cut_at_stop(text: str, stop: tuple[str, ...]) -> str | None:
    """`text` up to the first of the `stop` strings, as a server returns it (the stop string left out); None when
    none occurs."""
    cuts = [text.find(marker) for marker in stop if marker in text]
    return text[:min(cuts)] if cuts else None


def billed_once(completions: list[Completion], prompt_tokens: int) -> list[Completion]:
    """A call's completions, the first carrying the call's `prompt_tokens` (see `Completion`)."""
    return [replace(completion, prompt_tokens=prompt_tokens if index == 0 else 0)
            for index, completion in enumerate(completions)]


@dataclass(frozen=True)
class RayLLM:
    """How `ray.data.llm` runs an engine on a cluster: the processor config, the request row it reads (one per
    sample: `messages` or `prompt_text`, and `sampling`) and the answer it returns (`text`, `tokens`,
    `finish_reason`)."""

    config: Any
    preprocess: Callable[[dict[str, Any]], dict[str, Any]]
    answer: Callable[[dict[str, Any]], dict[str, Any]]


def import_ray_llm(engine: str) -> Any:
    try:
        import ray.data.llm
    except ImportError as exc:
        raise UserError(f"engine '{engine}' on Ray needs ray.data.llm ({exc}); `pip install 'ray[llm]'` on "
                        "the GPU nodes, or set executor.kind: local") from None
    return ray.data.llm


class Engine:
    """The base of every engine: a batch of requests in, exactly `request.n` completions per request out.

    A subclass sets `name`, implements `generate` (and `close` when it holds processes, servers or GPU memory),
    and checks its options in `check_config`, which runs before any model is loaded. An engine that finishes
    requests one at a time (over HTTP, say) overrides `generate_iter`, so the request cache records each as it
    finishes and a crash midway loses no finished request.
    """

    name: str = ""
    model: str = ""
    # Whether the engine always returns `n` completions when asked for `n` (no fan-out needed in n_mode auto).
    honours_n: bool = False

    @staticmethod
    def check_config(cfg: Any) -> None:
        """Raise UserError for a setting the engine cannot run with; needs no model and no server."""

    def generate(self, requests: list[Request]) -> list[list[Completion]]:
        """Return, for each request in order, exactly `request.n` completions."""
        raise NotImplementedError

    def generate_iter(self, requests: list[Request]) -> Iterator[tuple[int, list[Completion]]]:
        """Yield `(index into requests, completions)` for every request, in the order they finish."""
        yield from enumerate(self.generate(requests))

    def close(self) -> None:
        """Release processes, servers or GPU memory held by the engine."""

    @classmethod
    def ray_llm(cls, cfg: Any, replicas: int, gpus: float, chat: bool) -> RayLLM | None:
        """How `ray.data.llm` runs this engine with `replicas` replicas of `gpus` GPUs each (`chat`: the requests
        are chat messages, else raw prompts); None: Ray worker actors run the engine itself."""
        return None


# `name` or `org/name`: what the Hugging Face hub accepts as a model id.
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*(/[\w.-]+)?$")


def is_count(value: Any) -> bool:
    """Whether `value` is a non-negative integer (not a bool): a token count, a sample or choice index."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def in_request_order(answers: Iterable[tuple[int, list[Completion]]], count: int) -> list[list[Completion]]:
    """`generate`'s result from a streaming engine's `(index, completions)` pairs, which come as they finish."""
    results: list[list[Completion]] = [[] for _ in range(count)]
    for index, completions in answers:
        results[index] = completions
    return results


def check_local_model(model: str, engine: str) -> None:
    """Raise UserError unless `model` is an existing folder or a hub id (in the local cache when offline)."""
    if model and Path(model).expanduser().is_dir():
        return
    where = f"field 'model' of a role with engine '{engine}'"
    if not model or not _HUB_ID.match(model) or Path(model).expanduser().exists():
        raise UserError(f"model folder '{model}' does not exist ({where}); give a model folder or a Hugging Face id")
    from huggingface_hub import constants, try_to_load_from_cache

    if constants.HF_HUB_OFFLINE and not isinstance(try_to_load_from_cache(model, "config.json"), str):
        raise UserError(
            f"model '{model}' is not a local folder and not in the Hugging Face cache ({where}); "
            "give a model folder, or download it and unset HF_HUB_OFFLINE"
        )


def read_chat_template(option: str | None) -> str | None:
    """The `chat_template` engine option: a Jinja template, or the path of a file holding one."""
    if option is None or "{" in option:
        return option
    path = Path(option).expanduser()
    if not path.is_file():
        raise UserError(f"chat template file '{option}' does not exist (engine option 'chat_template'); fix the path")
    return path.read_text()


def check_options(options: dict[str, Any], known: set[str], engine: str) -> None:
    """Raise UserError on the first engine option `engine` does not understand."""
    unknown = sorted(set(options) - known)
    if unknown:
        raise UserError(
            f"engine option '{unknown[0]}' is not used by the {engine} engine (field 'options' of the role); "
            f"use one of: {', '.join(sorted(known))}"
        )


def missing_chat_template(model: str) -> UserError:
    return UserError(
        f"model '{model}' has no chat template and the requests are chat messages; set engine option "
        "'chat_template' (a Jinja template or a file holding one) in the role's options"
    )
