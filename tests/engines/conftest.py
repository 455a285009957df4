from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from _openai_server import FakeServer, serving

from sws.worlds.arith.policy import build_policy


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with serving() as fake:
        yield fake


@pytest.fixture(scope="session")
def random_policy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The arith world's tiny Qwen2 with random weights: a real model folder, quick to build and load."""
    return build_policy(tmp_path_factory.mktemp("random_policy"), seed=0)


@pytest.fixture(scope="session")
def trained_policy() -> Path:
    """The warm-started tiny policy (trained once, then cached under ~/.cache/sws): it answers `\\boxed{N}`."""
    from sws.worlds.arith.bootstrap import bootstrap_policy

    return bootstrap_policy()
