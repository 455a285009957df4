"""Settings shared by every test."""

import os

import pytest
from hypothesis import settings

from sws.grading import GradingPool

# CI (`.ci/run` sets CI=1) replays the same generated inputs every run; a developer's runs keep drawing new ones.
settings.register_profile("ci", derandomize=True)
settings.load_profile("ci" if os.environ.get("CI") else "default")


@pytest.fixture
def slow_to_grade() -> str:
    """A prediction math-verify takes seconds over: past a 0.5 s grading deadline, always."""
    return "x" * 100_000


@pytest.fixture
def impatient_pool():
    """A one-worker GradingPool with a 0.5 s deadline, shorter than math-verify's own 1 s timeouts, so only the
    deadline ends a slow pair; its worker is already up."""
    with GradingPool(workers=1, deadline_s=0.5) as pool:
        pool.grade([("1", "1.0")])
        yield pool
