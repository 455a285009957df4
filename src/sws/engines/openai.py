"""The `openai` engine: the official `openai` client against any OpenAI-compatible server (`vllm serve`, SGLang,
hosted APIs).

Chat requests go to /chat/completions, raw prompts to /completions, at most `max_concurrency` at a time (threads).
A timeout halves that limit (down to one request at a time, said once per change): a one-request server such as
llama.cpp would otherwise time out on every request it queues. Rate limits (429), server errors (5xx), timeouts
and dropped connections are retried `max_retries` times with exponential backoff and jitter. Each request has a
total `deadline` (seconds; default from its max_tokens) and its reply a size bound (`sws.engines.bounded_reply`);
requests run on daemon threads, so Ctrl-C never waits for them. The API key comes
only from the environment variable named by `api_key_env` (default OPENAI_API_KEY; a local server accepts the
value EMPTY). When built, the engine lists the server's models, so an unreachable server, a rejected key or an
unserved model is one clear error before any request. A server that returns fewer choices than `n` is handled
by `sws.engines.fanout` (option `n_mode`). Every 200 reply is checked before use: a body that is not an
OpenAI completion (an HTML page, text that is not JSON, no choices, more than `n`, mistyped fields) is one error
naming `base_url` and what came; a missing or negative token count is 0; lone UTF-16 surrogates become U+FFFD.
"""

from __future__ import annotations

import functools
import json
import os
import random
import re
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import openai

from sws import ui
from sws.budget import largest_remainder
from sws.config import EngineConfig
from sws.engines.base import (
    FINISHED,
    Completion,
    Engine,
    RayLLM,
    Request,
    billed_once,
    check_options,
    import_ray_llm,
    in_request_order,
    is_count,
)
from sws.engines.bounded_reply import bounded_session, default_deadline_s, read_bounded, size_bound
from sws.engines.daemon_threads import unordered_map
from sws.errors import UserError
from sws.secrets import redact, remember_secret

T = TypeVar("T")

OPTIONS = {"api_key_env", "base_url", "deadline", "max_concurrency", "max_retries", "retry_backoff", "timeout"}
_RETRIED_STATUS = {408, 409, 429}
_MAX_BACKOFF_S = 60.0


class OpenAIEngine(Engine):
    name = "openai"

    def __init__(self, cfg: EngineConfig) -> None:
        self.check_config(cfg)
        options = cfg.options
        self.model = cfg.model
        self.base_url: str = options.get("base_url") or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        self.max_concurrency = int(options.get("max_concurrency", 16))
        self.concurrency = AdaptiveLimit(self.max_concurrency, f"{self.name} engine ({self.base_url})")
        self.max_retries = int(options.get("max_retries", 5))
        self.retry_backoff = float(options.get("retry_backoff", 1.0))
        self.timeout = _seconds(options, "timeout", 600.0)
        self.deadline_s = _seconds(options, "deadline", None)
        key_env = options.get("api_key_env", "OPENAI_API_KEY")
        self.client = openai.OpenAI(base_url=self.base_url, api_key=api_key(options), max_retries=0,
                                    timeout=self.timeout)
        self._check_server(key_env)

    @classmethod
    def ray_llm(cls, cfg: EngineConfig, replicas: int, gpus: float, chat: bool) -> RayLLM:
        """Ray's HTTP processor: at most `max_concurrency` requests per second per replica, chat messages to
        /chat/completions and raw prompts to /completions, each within the deadline and size bound of this
        engine's requests, as this engine sends them."""
        options = cfg.options
        base_url = options.get("base_url") or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        key = api_key(options)
        deadline_s = _seconds(options, "deadline", None) or default_deadline_s(cfg.max_tokens)
        config = import_ray_llm(cls.name).HttpRequestProcessorConfig(
            url=f"{base_url.rstrip('/')}/{'chat/completions' if chat else 'completions'}",
            headers={"Authorization": f"Bearer {key}"}, qps=int(options.get("max_concurrency", 16)),
            max_retries=int(options.get("max_retries", 3)), concurrency=replicas,
            session_factory=functools.partial(bounded_session, base_url, deadline_s, size_bound(cfg.max_tokens, 1)),
        )
        return RayLLM(config, functools.partial(ray_llm_row, model=cfg.model),
                      functools.partial(ray_llm_answer, base_url=base_url, key=key))

    @staticmethod
    def check_config(cfg: EngineConfig) -> None:
        check_options(cfg.options, OPTIONS, OpenAIEngine.name)
        key_env = cfg.options.get("api_key_env", "OPENAI_API_KEY")
        if not api_key(cfg.options):
            raise UserError(
                f"environment variable {key_env} is not set (engine option 'api_key_env'); export it, "
                "with the value EMPTY for a local server that needs no key"
            )

    def generate(self, requests: list[Request]) -> list[list[Completion]]:
        return in_request_order(self.generate_iter(requests), len(requests))

    def generate_iter(self, requests: list[Request]) -> Iterator[tuple[int, list[Completion]]]:
        return unordered_map(self._complete, requests, self.max_concurrency)

    def close(self) -> None:
        self.client.close()

    def _check_server(self, key_env: str) -> None:
        try:
            raw = self.client.models.with_raw_response.list()
        except openai.APIConnectionError as exc:
            raise UserError(
                f"cannot reach the server at {self.base_url} (engine option 'base_url'): {_reason(exc)}; "
                "start the server or fix base_url"
            ) from None
        except openai.AuthenticationError:
            raise UserError(
                f"the server at {self.base_url} rejected the API key in {key_env} (engine option 'api_key_env'); "
                "export the right key"
            ) from None
        except openai.APIStatusError as exc:
            raise _refused(self.base_url, exc) from None
        served = _served_models(_json_object(raw.text, self.base_url, "its model list"), self.base_url)
        if self.model not in served:
            raise UserError(
                f"model '{self.model}' is not served at {self.base_url} (field 'model' of the role); "
                f"it serves: {', '.join(served[:10]) or 'nothing'}"
            )

    def _complete(self, request: Request) -> list[Completion]:
        settings = {
            "model": self.model, "n": request.n, "temperature": request.temperature, "top_p": request.top_p,
            "max_tokens": request.max_tokens, "stop": list(request.stop) or None, "seed": request.seed,
        }
        settings = {name: value for name, value in settings.items() if value is not None}
        chat = request.messages is not None
        if chat:
            create = functools.partial(self.client.chat.completions.with_streaming_response.create,
                                       messages=list(request.messages))
        else:
            create = functools.partial(self.client.completions.with_streaming_response.create, prompt=request.prompt)
        deadline_s = self.deadline_s or default_deadline_s(request.max_tokens)
        max_bytes = size_bound(request.max_tokens, request.n)

        def send() -> str:
            # A stalled read must not outlast the deadline either.
            started = time.monotonic()
            reply = create(**settings, timeout=min(self.timeout, deadline_s))
            return read_bounded(reply, self.base_url, started, deadline_s, max_bytes)

        response = _json_object(self._with_retries(send), self.base_url, "a completion")
        choices = _checked_choices(response, chat, request.n, self.base_url)
        texts = [text for text, _ in choices]
        tokens = _split_tokens(_usage_count(response, "completion_tokens"), texts)
        return billed_once([Completion(text, count, reason or FINISHED)
                            for (text, reason), count in zip(choices, tokens, strict=True)],
                           _usage_count(response, "prompt_tokens"))

    def _with_retries(self, call: Callable[[], T]) -> T:
        attempt = 0
        while True:
            try:
                with self.concurrency.slot() as limit_when_sent:
                    try:
                        return call()
                    except openai.APITimeoutError:
                        self.concurrency.halve(limit_when_sent)
                        raise
            except (openai.APIConnectionError, openai.APIStatusError) as exc:
                retryable = isinstance(exc, openai.APIConnectionError) or _retryable_status(exc.status_code)
                if not retryable:
                    raise _refused(self.base_url, exc) from None
                if attempt == self.max_retries:
                    raise UserError(
                        f"the server at {self.base_url} kept failing ({_reason(exc)}) after {self.max_retries} "
                        "retries (engine option 'max_retries'); check the server, then rerun to resume"
                    ) from None
            delay = min(self.retry_backoff * 2**attempt, _MAX_BACKOFF_S)
            time.sleep(delay * random.uniform(0.5, 1.0))
            attempt += 1


def api_key(options: dict[str, Any]) -> str:
    """The key in the environment variable option `api_key_env` names, remembered as a secret to redact."""
    key = os.environ.get(options.get("api_key_env", "OPENAI_API_KEY"), "")
    remember_secret(key)
    return key


class AdaptiveLimit:
    """At most `limit` requests in flight; a timeout halves the limit it was sent under (down to 1)."""

    def __init__(self, limit: int, owner: str) -> None:
        self.limit = max(1, limit)
        self.owner = owner
        self._in_flight = 0
        self._changed = threading.Condition()

    @contextmanager
    def slot(self) -> Iterator[int]:
        """Wait for a free slot; yields the limit in force when the request goes out."""
        with self._changed:
            self._changed.wait_for(lambda: self._in_flight < self.limit)
            self._in_flight += 1
            limit = self.limit
        try:
            yield limit
        finally:
            with self._changed:
                self._in_flight -= 1
                self._changed.notify_all()

    def halve(self, limit_when_sent: int) -> None:
        # Requests sent together time out together; only the first of them lowers the limit.
        with self._changed:
            if self.limit != limit_when_sent or self.limit == 1:
                return
            self.limit //= 2
        ui.info(f"{self.owner}: a request timed out; lowering concurrency to {self.limit} "
                "(engine options max_concurrency, timeout)")


def _seconds(options: dict[str, Any], name: str, default: float | None) -> float | None:
    value = options.get(name, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < float("inf"):
        raise UserError(f"engine option '{name}' of the openai engine is {value!r}; give a positive number of "
                        "seconds (field 'options' of the role)")
    return float(value)


def _retryable_status(status: int) -> bool:
    return status in _RETRIED_STATUS or status >= 500


def _reason(exc: openai.APIError) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}"
    cause = exc.__cause__ or exc
    return (str(cause).splitlines() or [type(cause).__name__])[0]


def _refused(base_url: str, exc: openai.APIStatusError) -> UserError:
    # The client puts the server's "error" object in `body`; its message is what the server said.
    detail = exc.body.get("message") if isinstance(exc.body, dict) else None
    message = (str(detail or exc.message).splitlines() or [""])[0][:300]
    return UserError(f"the server at {base_url} refused a request: HTTP {exc.status_code}: {message}")


CHECK_BASE_URL = ("check that base_url (engine option 'base_url') is the API's address, such as "
                  "http://host:8000/v1")
SERVER_FAULT = "a fault of the server, not of sws: update or replace the server"


def _not_openai(base_url: str, what: str, fix: str = SERVER_FAULT) -> UserError:
    return UserError(f"the server at {base_url} did not answer as an OpenAI-compatible server: it sent {what}; {fix}")


def _json_object(text: str, base_url: str, expected: str) -> dict[str, Any]:
    """The body of a 200 reply as a JSON object, or the one-line error saying what came instead of `expected`."""
    try:
        body = json.loads(text)
    except ValueError:
        start = text.lstrip()[:200].lower()
        if start.startswith(("<!doctype html", "<html")) or "<html" in start:
            raise _not_openai(base_url, f"an HTML page instead of {expected}", CHECK_BASE_URL) from None
        raise _not_openai(base_url, f"text that is not JSON instead of {expected} ({text[:60]!r})",
                          CHECK_BASE_URL) from None
    if not isinstance(body, dict):
        raise _not_openai(base_url, f"a JSON {type(body).__name__} instead of {expected}", CHECK_BASE_URL)
    return body


def _served_models(body: dict[str, Any], base_url: str) -> list[str]:
    data = body.get("data")
    if not isinstance(data, list) or not all(isinstance(m, dict) and isinstance(m.get("id"), str) for m in data):
        raise _not_openai(base_url, "a model list without a 'data' list of models with an 'id'", CHECK_BASE_URL)
    return [model["id"] for model in data]


def _checked_choices(response: dict[str, Any], chat: bool, n: int, base_url: str) -> list[tuple[str, str | None]]:
    """(text, finish_reason) of each choice in index order. A reply with no choice, more than `n`, or choices of
    the wrong shape is the server's fault; fewer than `n` is left to `n_mode` (`sws.engines.fanout`)."""
    choices = response.get("choices")
    if not isinstance(choices, list) or not choices:
        raise _not_openai(base_url, "a completion without choices")
    if len(choices) > n:
        raise _not_openai(base_url, f"{len(choices)} choices for a request with n={n}")
    checked = []
    for position, choice in enumerate(choices):
        if not isinstance(choice, dict):
            raise _not_openai(base_url, "a choice that is not a JSON object")
        message = choice.get("message") if chat else None
        text = (message.get("content") if isinstance(message, dict) else None) if chat else choice.get("text")
        reason = choice.get("finish_reason")
        index = choice.get("index", position)
        if not isinstance(text, str | None) or not isinstance(reason, str | None) or not is_count(index):
            raise _not_openai(base_url, "a choice whose text, finish_reason or index has the wrong type")
        checked.append((index, _without_lone_surrogates(text or ""), reason))
    if len({index for index, _, _ in checked}) != len(checked):
        raise _not_openai(base_url, "two choices with the same index")
    return [(text, reason) for _, text, reason in sorted(checked, key=lambda choice: choice[0])]


def _usage_count(response: dict[str, Any], field: str) -> int:
    """A token count of the reply's `usage` (`prompt_tokens`, `completion_tokens`); a missing, mistyped or
    negative count is taken as 0."""
    usage = response.get("usage")
    count = usage.get(field) if isinstance(usage, dict) else None
    return count if is_count(count) else 0


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _without_lone_surrogates(text: str) -> str:
    """JSON may escape half of a UTF-16 pair (\\ud800); such a character cannot be stored as UTF-8."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def _split_tokens(total: int, texts: list[str]) -> list[int]:
    """Per-choice token counts: exact for one choice; for several, the response's total split by text length.

    The API reports only a total for all choices of a request.
    """
    if len(texts) == 1:
        return [total]
    # +1 per text for its end-of-sequence token, so empty texts still take a share.
    counts = largest_remainder({f"{i:06d}": len(text) + 1 for i, text in enumerate(texts)}, total)
    return [counts[f"{i:06d}"] for i in range(len(texts))]


def ray_llm_row(row: dict[str, Any], model: str) -> dict[str, Any]:
    sampling = {name: value for name, value in row["sampling"].items() if value is not None}
    prompt = {"messages": row["messages"]} if row["messages"] else {"prompt": row["prompt_text"]}
    return {**row, "payload": {"model": model, **prompt, **sampling}}


def ray_llm_answer(row: dict[str, Any], base_url: str, key: str = "") -> dict[str, Any]:
    """One sample's reply (Ray's processor sends one request per sample), checked as `_complete` checks it, with
    the API key `key` redacted (this runs in a Ray worker, which never resolved the key itself)."""
    response = row["http_response"]
    if not isinstance(response, dict):
        raise _not_openai(base_url, f"a {type(response).__name__} instead of a completion", CHECK_BASE_URL)
    choices = response.get("choices")
    chat = isinstance(choices, list) and bool(choices) and isinstance(choices[0], dict) and "message" in choices[0]
    [(text, reason)] = _checked_choices(response, chat, 1, base_url)
    return {"text": redact(text, [key]), "tokens": _usage_count(response, "completion_tokens"),
            "prompt_tokens": _usage_count(response, "prompt_tokens"), "finish_reason": reason or FINISHED}
