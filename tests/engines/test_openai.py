"""The openai engine against a small local fake of an OpenAI-compatible server (a test double for the network)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from sws.config import EngineConfig
from sws.engines import make_engine
from sws.engines.base import Request
from sws.errors import UserError

MODEL = "fake-model"


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
        try:
            time.sleep(stall + server.delay_s)
            if failure is not None:
                self._reply(failure, {"error": {"message": f"scripted failure {failure}", "type": "test"}})
            elif self.path.endswith("/chat/completions"):
                self._reply(200, completion_body(body, chat=True))
            else:
                self._reply(200, completion_body(body, chat=False))
        finally:
            with server.lock:
                server.in_flight -= 1

    def _reply(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            pass


def completion_body(body: dict[str, Any], chat: bool) -> dict[str, Any]:
    source = body["messages"][-1]["content"] if chat else body["prompt"]
    texts = [f"{source} -> sample {i} \\boxed{{{i}}}" for i in range(body.get("n", 1))]
    if chat:
        choices = [{"index": i, "message": {"role": "assistant", "content": t}, "finish_reason": "stop"}
                   for i, t in enumerate(texts)]
    else:
        choices = [{"index": i, "text": t, "finish_reason": "stop"} for i, t in enumerate(texts)]
    choices.reverse()  # servers need not return choices in index order
    usage = {"prompt_tokens": 3, "completion_tokens": 10 * len(texts), "total_tokens": 3 + 10 * len(texts)}
    return {"id": "x", "object": "chat.completion" if chat else "text_completion", "created": 0, "model": MODEL,
            "choices": choices, "usage": usage}


@pytest.fixture
def server() -> Iterator[FakeServer]:
    fake = FakeServer()
    thread = threading.Thread(target=fake.serve_forever, daemon=True)
    thread.start()
    yield fake
    fake.shutdown()
    fake.server_close()


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")


def engine_for(server: FakeServer, **options: Any):
    return make_engine(EngineConfig(
        engine="openai", model=MODEL, options={"base_url": server.base_url, "retry_backoff": 0.01, **options}))


def closed_port_url() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_chat_and_prompt_requests_reach_their_endpoints_with_the_sampling_settings(server: FakeServer) -> None:
    chat = Request(messages=({"role": "user", "content": "Compute 2+2."},), n=2, temperature=0.3, top_p=0.9,
                   max_tokens=50, stop=("\n\n",), seed=11)
    raw = Request(prompt="Compute 1+1.\n", n=1, seed=12)
    results = engine_for(server).generate([chat, raw])

    assert [c.text for c in results[0]] == ["Compute 2+2. -> sample 0 \\boxed{0}", "Compute 2+2. -> sample 1 \\boxed{1}"]
    assert [c.text for c in results[1]] == ["Compute 1+1.\n -> sample 0 \\boxed{0}"]
    sent = dict(server.posts)
    assert sent["/v1/chat/completions"] | {"messages": None} == {
        "model": MODEL, "messages": None, "n": 2, "temperature": 0.3, "top_p": 0.9, "max_tokens": 50,
        "stop": ["\n\n"], "seed": 11}
    assert sent["/v1/completions"]["prompt"] == "Compute 1+1.\n" and "stop" not in sent["/v1/completions"]


def test_token_counts_add_up_to_the_reported_usage(server: FakeServer) -> None:
    results = engine_for(server).generate([Request(prompt="x", n=3), Request(prompt="y", n=1)])
    assert sum(c.tokens for c in results[0]) == 30
    assert [c.tokens for c in results[1]] == [10]


def test_the_api_key_comes_from_the_named_environment_variable(server: FakeServer, monkeypatch) -> None:
    monkeypatch.setenv("MY_SERVER_KEY", "secret-from-env")
    engine_for(server, api_key_env="MY_SERVER_KEY")
    assert server.authorizations == ["Bearer secret-from-env"]


def test_a_missing_api_key_variable_is_a_one_line_user_error(server: FakeServer, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY")
    with pytest.raises(UserError, match="OPENAI_API_KEY is not set") as error:
        engine_for(server)
    assert "\n" not in str(error.value)


def test_rate_limits_and_server_errors_are_retried(server: FakeServer) -> None:
    server.failures = [429, 500, 503]
    results = engine_for(server).generate([Request(prompt="x", n=1)])
    assert results[0][0].text.startswith("x -> sample 0")
    assert len(server.posts) == 4


def test_a_timeout_is_retried(server: FakeServer) -> None:
    server.stall_first_s = 2.0
    results = engine_for(server, timeout=0.5).generate([Request(prompt="x", n=1)])
    assert results[0][0].text.startswith("x -> sample 0")
    assert len(server.posts) == 2


def test_retries_are_bounded_and_end_in_a_one_line_user_error(server: FakeServer) -> None:
    server.failures = [503] * 10
    with pytest.raises(UserError, match=r"kept failing \(HTTP 503\) after 2 retries") as error:
        engine_for(server, max_retries=2).generate([Request(prompt="x")])
    assert len(server.posts) == 3
    assert "\n" not in str(error.value)


def test_backoff_grows_between_retries(server: FakeServer) -> None:
    server.failures = [503, 503, 503]
    started = time.perf_counter()
    engine_for(server, retry_backoff=0.2).generate([Request(prompt="x")])
    # Waits of 0.2, 0.4 and 0.8 s, each jittered down to no less than half.
    assert time.perf_counter() - started >= 0.7


def test_a_refused_request_is_not_retried(server: FakeServer) -> None:
    server.failures = [400]
    with pytest.raises(UserError, match="refused a request: HTTP 400: scripted failure 400"):
        engine_for(server).generate([Request(prompt="x")])
    assert len(server.posts) == 1


def test_concurrency_is_bounded(server: FakeServer) -> None:
    server.delay_s = 0.15
    results = engine_for(server, max_concurrency=3).generate([Request(prompt=f"p{i}") for i in range(9)])
    assert [r[0].text.split(" ->")[0] for r in results] == [f"p{i}" for i in range(9)]
    assert server.max_in_flight == 3


def test_an_unreachable_server_is_a_one_line_user_error_at_start() -> None:
    url = closed_port_url()
    with pytest.raises(UserError, match=f"cannot reach the server at {url}.*start the server or fix base_url") as error:
        make_engine(EngineConfig(engine="openai", model=MODEL, options={"base_url": url}))
    assert "\n" not in str(error.value)


def test_a_model_the_server_does_not_serve_is_a_user_error(server: FakeServer) -> None:
    with pytest.raises(UserError, match=f"model 'other' is not served at .* it serves: {MODEL}"):
        make_engine(EngineConfig(engine="openai", model="other", options={"base_url": server.base_url}))


def test_results_go_through_the_request_cache(server: FakeServer, tmp_path: Path) -> None:
    cfg = EngineConfig(engine="openai", model=MODEL, options={"base_url": server.base_url})
    requests = [Request(prompt=f"p{i}", n=2, seed=i) for i in range(4)]
    first = make_engine(cfg, tmp_path).generate(requests)
    again = make_engine(cfg, tmp_path).generate(requests)
    assert again == first
    assert len(server.posts) == 4
