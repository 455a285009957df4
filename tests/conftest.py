"""Settings shared by every test."""

import os
import signal
from pathlib import Path

import pytest
from hypothesis import settings

from sws import grading
from sws.grading import GradingPool
from sws.worlds.math.verifier import MathVerifier

# CI (`.ci/run` sets CI=1) replays the same generated inputs every run; a developer's runs keep drawing new ones.
settings.register_profile("ci", derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "default")


@pytest.fixture
def slow_to_grade() -> str:
    """A prediction math-verify takes seconds over: past a 0.5 s grading deadline, always."""
    return "x" * 100_000


@pytest.fixture
def impatient_pool():
    """A one-worker GradingPool of the math verifier with a 0.5 s deadline, shorter than math-verify's own 1 s
    timeouts, so only the deadline ends a slow pair; its worker is already up."""
    with GradingPool(MathVerifier(), workers=1, deadline_s=0.5) as pool:
        pool.grade([("1", "1.0")])
        yield pool


@pytest.fixture
def verifier_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """The calls of the word world's verifier (`word_world`), from any process, since the fixture started: a
    function that returns them as [method, *arguments] lists."""
    from word_world import CALLS_ENV, read_calls

    path = tmp_path / "verifier-calls.jsonl"
    monkeypatch.setenv(CALLS_ENV, str(path))
    grading.close_pool()  # grading workers started before would not see the variable
    yield lambda: read_calls(path)
    grading.close_pool()


# A shell that starts pytest in the background (nohup, some CI runners) hands it SIGINT ignored; the Ctrl-C tests
# need Python's own handler, as a terminal's Ctrl-C finds it.
signal.signal(signal.SIGINT, signal.default_int_handler)
