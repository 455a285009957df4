"""A server that drips its reply or floods it: abandoned at the request's deadline or the reply's size bound,
with one line, nothing cached, and Ctrl-C acting within seconds."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest
import yaml
from _interrupt import PROMPT_END_S, interrupt_when
from _openai_server import MODEL, FakeServer, engine_for
from typer.testing import CliRunner

from sws.cli import app
from sws.engines.base import Request
from sws.engines.bounded_reply import default_deadline_s, size_bound
from sws.errors import UserError

SWS = Path(sys.executable).parent / "sws"


@pytest.fixture(autouse=True)
def api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")


def test_the_limits_grow_with_max_tokens() -> None:
    assert default_deadline_s(4096) > default_deadline_s(512) > 0
    assert size_bound(512, 2) > size_bound(512, 1) > size_bound(16, 1)


def test_a_dripping_server_is_abandoned_at_the_deadline(server: FakeServer) -> None:
    server.drip_s = 0.1  # a reply of a few hundred bytes would take the server's whole 30 s drip limit
    started = time.monotonic()
    with pytest.raises(UserError) as error:
        engine_for(server, deadline=1).generate([Request(prompt="x", n=1)])
    assert time.monotonic() - started < 15  # well before the reply ends, even on a loaded machine
    assert server.base_url in str(error.value) and "'deadline'" in str(error.value)


def test_a_server_dripping_its_headers_is_abandoned_at_the_deadline(server: FakeServer) -> None:
    server.drip_s, server.drip_headers = 0.5, True  # each byte restarts the client's read timeout
    started = time.monotonic()
    with pytest.raises(UserError) as error:
        engine_for(server, deadline=1).generate([Request(prompt="x", n=1)])
    assert time.monotonic() - started < 15  # the headers alone would take the server's whole 30 s drip limit
    assert server.base_url in str(error.value) and "'deadline'" in str(error.value)


def test_a_flooding_server_is_abandoned_at_the_size_bound(server: FakeServer) -> None:
    server.flood_bytes = 2_000_000
    with pytest.raises(UserError) as error:
        engine_for(server).generate([Request(prompt="x", n=1, max_tokens=100)])
    assert server.base_url in str(error.value) and f"over {size_bound(100, 1)} bytes" in str(error.value)


def test_a_reply_within_the_bound_is_taken(server: FakeServer) -> None:
    server.flood_bytes = 1000
    [[completion]] = engine_for(server).generate([Request(prompt="x", n=1, max_tokens=100)])
    assert completion.text == "x" * 1000


def pipeline_for(folder: Path, server: FakeServer) -> Path:
    path = folder / "pipeline.yaml"
    role = {"engine": "openai", "model": MODEL, "options": {"base_url": server.base_url, "max_retries": 0}}
    path.write_text(yaml.safe_dump({"roles": {"generator": role}}))
    return path


def sample_args(run: Path, pipeline: Path) -> list[str]:
    return ["sample", "--run", str(run), "--role", "generator", "--prompt", "Compute 2+2.", "--config", str(pipeline)]


def test_a_flooded_reply_is_one_line_and_not_cached(server: FakeServer, tmp_path: Path) -> None:
    run, pipeline = tmp_path / "run", pipeline_for(tmp_path, server)
    server.flood_bytes = 5_000_000
    flooded = CliRunner().invoke(app, sample_args(run, pipeline))
    assert flooded.exit_code == 2
    [line] = flooded.stderr.splitlines()
    assert line.startswith("error: ") and server.base_url in line and "bytes" in line

    server.flood_bytes = 0
    answered = CliRunner().invoke(app, sample_args(run, pipeline))
    assert answered.exit_code == 0, answered.output
    assert "Compute 2+2. -> sample 0" in answered.stdout
    assert len(server.posts) == 2  # asked again: the flood was never cached


@pytest.mark.slow
def test_ctrl_c_ends_a_command_waiting_on_a_dripping_server_within_5_seconds(server: FakeServer,
                                                                              tmp_path: Path) -> None:
    server.drip_s = 0.5
    command = [str(SWS), *sample_args(tmp_path / "run", pipeline_for(tmp_path, server))]
    # the reply drips from the moment the server has the request
    ended, seconds = interrupt_when(command, lambda: bool(server.posts), "its request")
    assert seconds < PROMPT_END_S, seconds
    assert ended.returncode == 130, ended.stderr
    assert "Traceback" not in ended.stderr


@pytest.mark.parametrize("deadline", ["soon", 0, -1, True])
def test_a_deadline_that_is_no_number_of_seconds_is_one_line(server: FakeServer, deadline) -> None:
    with pytest.raises(UserError, match="engine option 'deadline' of the openai engine"):
        engine_for(server, deadline=deadline)
