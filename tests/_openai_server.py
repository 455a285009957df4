"""A small OpenAI-compatible server for tests: /v1/models, /v1/completions and /v1/chat/completions, with
scripted failures, stalls, a finish reason, a mode that ignores `n` like llama.cpp's server, an optional
writer of the answers' text, and hostile modes: a fixed raw body for GETs or POSTs (an HTML page, text that is
not JSON), an edit of each completion body (no choices, too many, negative usage, lone surrogates), a drip (the
reply, or its status line and headers too, one byte at a time, for a bounded time) and a flood (a completion text
of a given size)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from _http_serving import running, send

from sws.config import EngineConfig
from sws.engines import make_engine

MODEL = "fake-model"
DRIP_LIMIT_S = 30.0


class FakeServer(ThreadingHTTPServer):
    """Serves /v1/models, /v1/completions and /v1/chat/completions; fails or stalls on cue; records what it saw."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), FakeHandler)
        self.failures: list[int] = []  # HTTP statuses to answer the next POSTs with, in order
        self.stall_first_s = 0.0  # the first POST waits this long before answering
        self.delay_s = 0.0
        self.posts: list[tuple[str, dict[str, Any]]] = []
        self.authorizations: list[str] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self.ignores_n = False  # answer one choice whatever n asks, like llama.cpp's server
        # (prompt, request body) -> the text of one choice; None: echo the prompt with the sample's index
        self.writer: Callable[[str, dict[str, Any]], str] | None = None
        self.finish_reason = "stop"
        # Hostile modes: (content type, body) sent with status 200 instead of the real reply.
        self.raw_get: tuple[str, bytes] | None = None
        self.raw_post: tuple[str, bytes] | None = None
        self.mangle: Callable[[dict[str, Any]], dict[str, Any]] | None = None  # edits each completion body
        self.drip_s = 0.0  # > 0: send each POST reply one byte per drip_s, giving up after DRIP_LIMIT_S
        self.drip_headers = False  # with drip_s: the status line and headers drip too
        self.flood_bytes = 0  # > 0: each completion's text is this many bytes, whatever max_tokens says
        self.echo_authorization = False  # repeat the Authorization header in every completion and error
        self.lock = threading.Lock()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class FakeHandler(BaseHTTPRequestHandler):
    server: FakeServer

    def log_message(self, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.authorizations.append(self.headers.get("Authorization", ""))
        if self.server.raw_get is not None:
            self._send(200, *self.server.raw_get)
            return
        self._reply(200, {"object": "list", "data": [{"id": MODEL, "object": "model", "created": 0, "owned_by": "me"}]})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        server = self.server
        with server.lock:
            server.posts.append((self.path, body))
            failure = server.failures.pop(0) if server.failures else None
            stall = server.stall_first_s if len(server.posts) == 1 else 0.0
            server.in_flight += 1
            server.max_in_flight = max(server.max_in_flight, server.in_flight)
        echoed = f" (you sent {self.headers.get('Authorization', '')})" if server.echo_authorization else ""
        try:
            time.sleep(stall + server.delay_s)
            if failure is not None:
                self._reply(failure, {"error": {"message": f"scripted failure {failure}{echoed}", "type": "test"}})
            elif server.raw_post is not None:
                self._send(200, *server.raw_post)
            else:
                reply = completion_body(body, chat=self.path.endswith("/chat/completions"), server=server,
                                        echoed=echoed)
                reply = server.mangle(reply) if server.mangle is not None else reply
                if server.drip_s > 0:
                    self._drip(json.dumps(reply).encode(), server.drip_s)
                else:
                    self._reply(200, reply)
        finally:
            with server.lock:
                server.in_flight -= 1

    def _reply(self, status: int, payload: dict[str, Any]) -> None:
        self._send(status, "application/json", json.dumps(payload).encode())

    def _drip(self, data: bytes, every_s: float) -> None:
        given_up = time.monotonic() + DRIP_LIMIT_S
        head = f"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode()
        if self.server.drip_headers:
            data = head + data
        try:
            if not self.server.drip_headers:
                self.wfile.write(head)
            for position in range(len(data)):
                if time.monotonic() > given_up:
                    return
                self.wfile.write(data[position:position + 1])
                self.wfile.flush()
                time.sleep(every_s)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up, as it should
            pass

    def _send(self, status: int, content_type: str, data: bytes) -> None:
        send(self, status, content_type, data)


def completion_body(body: dict[str, Any], chat: bool, server: FakeServer, echoed: str = "") -> dict[str, Any]:
    source = body["messages"][-1]["content"] if chat else body["prompt"]
    n = 1 if server.ignores_n else body.get("n", 1)
    if server.flood_bytes > 0:
        texts = ["x" * server.flood_bytes for _ in range(n)]
    elif server.writer is not None:
        texts = [server.writer(source, body) for _ in range(n)]
    elif server.ignores_n:
        texts = [f"{source} -> seed {body.get('seed')} \\boxed{{0}}"]
    else:
        texts = [f"{source} -> sample {i} \\boxed{{{i}}}" for i in range(n)]
    texts = [text + echoed for text in texts]
    reason = server.finish_reason
    if chat:
        choices = [{"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": reason}
                   for i, t in enumerate(texts)]
    else:
        choices = [{"index": i, "text": t, "finish_reason": reason} for i, t in enumerate(texts)]
    choices.reverse()  # servers need not return choices in index order
    usage = {"prompt_tokens": 3, "completion_tokens": 10 * len(texts), "total_tokens": 3 + 10 * len(texts)}
    return {"id": "x", "object": "chat.completion" if chat else "text_completion", "created": 0, "model": MODEL,
            "choices": choices, "usage": usage}


@contextmanager
def serving() -> Iterator[FakeServer]:
    with running(FakeServer()) as fake:
        yield fake


def engine_for(server: FakeServer, **options: Any):
    return make_engine(EngineConfig(
        engine="openai", model=MODEL, options={"base_url": server.base_url, "retry_backoff": 0.01, **options}))
