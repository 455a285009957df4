"""Limits on one reply of a server: a total deadline for the request and a size bound for its body.

A per-read timeout alone lets a server that sends one byte a second hold a request forever (its status line and
headers as much as its body), and a server that ignores `max_tokens` send gigabytes that would be parsed and
cached. Both limits follow from the request's `max_tokens`; a reply over either is abandoned (never returned, so
never cached) with one line naming the server and the limit.
"""

from __future__ import annotations

import json
import queue
import threading
import time
from contextlib import AbstractContextManager
from typing import Any

from sws.errors import UserError

# A slow server still writes this many tokens a second; the fixed part covers queueing and prompt processing.
_MIN_TOKENS_PER_S = 4
_DEADLINE_BASE_S = 300.0
# A token is a few characters; JSON may escape each as \uXXXX. The overhead covers the JSON around the texts.
_BYTES_PER_TOKEN = 32
_OVERHEAD_BYTES = 64 * 1024


def default_deadline_s(max_tokens: int) -> float:
    return _DEADLINE_BASE_S + max_tokens / _MIN_TOKENS_PER_S


def size_bound(max_tokens: int, n: int) -> int:
    return _OVERHEAD_BYTES + _BYTES_PER_TOKEN * max_tokens * n


def read_bounded(reply: AbstractContextManager[Any], base_url: str, started: float, deadline_s: float,
                 max_bytes: int) -> str:
    """The body of a streamed reply (the openai client's `with_streaming_response`), read as it arrives so that
    neither limit waits for the whole body; `started` is when the request went out (time.monotonic)."""
    chunks: list[bytes] = []
    size = 0
    response = _opened_by_deadline(reply, base_url, started, deadline_s)
    try:
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > max_bytes:
                raise _too_big(base_url, max_bytes)
            if time.monotonic() - started > deadline_s:
                raise _past_deadline(base_url, deadline_s)
            chunks.append(chunk)
    finally:
        reply.__exit__(None, None, None)
    return b"".join(chunks).decode("utf-8", errors="replace")


def _opened_by_deadline(reply: AbstractContextManager[Any], base_url: str, started: float,
                        deadline_s: float) -> Any:
    """`reply` entered (the request sent, the status line and headers read) before the deadline. The client reads
    the headers with its per-read timeout, which every byte restarts, so they are awaited on a daemon thread that
    is left behind at the deadline (the response is closed should it come after all)."""
    opened: queue.SimpleQueue[tuple[bool, Any]] = queue.SimpleQueue()
    lock = threading.Lock()
    abandoned = False

    def enter() -> None:
        try:
            response = reply.__enter__()
        except BaseException as exc:  # noqa: BLE001 - raised in the waiting thread
            opened.put((False, exc))
            return
        with lock:
            if not abandoned:
                opened.put((True, response))
                return
        reply.__exit__(None, None, None)

    threading.Thread(target=enter, daemon=True).start()
    try:
        ok, value = opened.get(timeout=max(0.0, started + deadline_s - time.monotonic()))
    except queue.Empty:
        with lock:
            abandoned = True
            late = None if opened.empty() else opened.get_nowait()
        if late is not None and late[0]:
            reply.__exit__(None, None, None)
        raise _past_deadline(base_url, deadline_s) from None
    if not ok:
        raise value
    return value


def bounded_session(base_url: str, deadline_s: float, max_bytes: int) -> Any:
    """An aiohttp session for Ray's HTTP processor (`ray.data.llm`) under the same limits: a request's total time
    (a timeout, which that processor retries) and the size of the reply it parses."""
    import aiohttp

    class BoundedResponse(aiohttp.ClientResponse):
        async def json(self, **_: Any) -> Any:
            body = bytearray()
            async for chunk in self.content.iter_any():
                body += chunk
                if len(body) > max_bytes:
                    raise _too_big(base_url, max_bytes)
            return json.loads(body)

    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=deadline_s), response_class=BoundedResponse)


def _too_big(base_url: str, max_bytes: int) -> UserError:
    return UserError(f"the server at {base_url} sent a reply over {max_bytes} bytes for its max_tokens (the bound "
                     f"is {_BYTES_PER_TOKEN} bytes a token plus {_OVERHEAD_BYTES // 1024} KiB); abandoned, not "
                     "cached: the server ignores max_tokens, fix or replace it")


def _past_deadline(base_url: str, deadline_s: float) -> UserError:
    return UserError(f"the server at {base_url} was still sending its reply after {deadline_s:.0f} s (engine "
                     "option 'deadline'); abandoned, not cached: check the server, or raise 'deadline'")
