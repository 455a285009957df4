"""n_mode: native n, fan-out into single-choice requests with distinct seeds, and auto detection."""

from __future__ import annotations

from pathlib import Path

import pytest

from sws.config import EngineConfig
from sws.engines import Request, make_engine
from sws.engines.base import Completion, Engine
from sws.engines.fanout import SampleFanOut, fan_out, read_n_mode
from sws.errors import UserError
from sws.worlds.arith.world import ORACLE


class OneChoiceServer(Engine):
    """Like llama.cpp's server: accepts n and returns one choice, which depends on the request's seed."""

    name = "one-choice"
    model = "m"

    def __init__(self, returns_n: bool = False) -> None:
        self.returns_n = returns_n
        self.sent: list[Request] = []

    def generate(self, requests: list[Request]) -> list[list[Completion]]:
        self.sent.extend(requests)
        return [[Completion(f"{request.prompt} seed={request.seed} #{i}") for i in range(request.n if self.returns_n else 1)]
                for request in requests]

    def close(self) -> None:
        pass


def requests(count: int = 3, n: int = 4) -> list[Request]:
    return [Request(prompt=f"q{i}", n=n, seed=10 * i) for i in range(count)]


def test_fan_out_gives_single_requests_with_consecutive_seeds() -> None:
    singles = fan_out(Request(prompt="q", n=3, seed=7, temperature=0.6))
    assert [(r.n, r.seed, r.temperature) for r in singles] == [(1, 7, 0.6), (1, 8, 0.6), (1, 9, 0.6)]


def test_auto_detects_a_server_without_n_on_the_first_reply_and_says_so_once(capsys) -> None:
    server = OneChoiceServer()
    engine = SampleFanOut(server, "auto")
    first, second = engine.generate(requests()), engine.generate(requests(2))

    assert all(len(samples) == 4 for samples in [*first, *second])
    assert [c.text for c in first[1]] == [f"q1 seed={seed} #0" for seed in (10, 11, 12, 13)]
    # One probe with n=4, then only single-choice requests.
    assert [r.n for r in server.sent].count(4) == 1
    assert " ".join(capsys.readouterr().err.split()).count("returned 1 of n=4 choices") == 1


def test_auto_keeps_native_n_when_the_server_returns_n() -> None:
    server = OneChoiceServer(returns_n=True)
    engine = SampleFanOut(server, "auto")
    results = engine.generate(requests())
    assert [len(samples) for samples in results] == [4, 4, 4]
    assert [r.n for r in server.sent] == [4, 4, 4] and engine.mode == "native"


def test_an_engine_that_declares_it_honours_n_is_not_probed() -> None:
    server = OneChoiceServer(returns_n=True)
    server.honours_n = True  # vllm and hf declare this; batching them one request apart would change samples
    batches: list[int] = []
    real_generate = server.generate
    server.generate = lambda batch: batches.append(len(batch)) or real_generate(batch)
    SampleFanOut(server, "auto").generate(requests())
    assert batches == [3]


def test_native_mode_names_the_option_when_choices_are_missing() -> None:
    with pytest.raises(UserError, match="n_mode"):
        SampleFanOut(OneChoiceServer(), "native").generate(requests())


def test_fanout_mode_never_sends_n() -> None:
    server = OneChoiceServer(returns_n=True)
    SampleFanOut(server, "fanout").generate(requests())
    assert {r.n for r in server.sent} == {1} and len(server.sent) == 12


def test_an_unknown_n_mode_is_a_user_error() -> None:
    with pytest.raises(UserError, match="'n_mode' is 'many'"):
        read_n_mode({"n_mode": "many"})


@pytest.mark.parametrize("mode", ["auto", "fanout"])
def test_the_oracle_without_n_gives_distinct_samples_under_fan_out(mode: str, tmp_path: Path) -> None:
    cfg = EngineConfig(**ORACLE, options={"ignores_n": True, "n_mode": mode, "labeler_error": 0.5})
    request = Request(prompt="label", n=8, seed=3, task="label", fields={"problem": "Compute 47+85."})
    samples = make_engine(cfg, tmp_path / "requests.sqlite").generate([request])[0]
    assert len(samples) == 8 and len({c.text for c in samples}) > 1


class SometimesAllChoices(OneChoiceServer):
    """Returns every choice on the first reply, one on the others: `auto` settles on native, then falls short."""

    def generate(self, requests: list[Request]) -> list[list[Completion]]:
        self.returns_n = not self.sent
        return super().generate(requests)


def test_auto_that_settled_on_native_says_auto_and_advises_fanout() -> None:
    with pytest.raises(UserError, match=r"n_mode' is auto\); set n_mode: fanout") as error:
        SampleFanOut(SometimesAllChoices(), "auto").generate(requests())
    assert "is native" not in str(error.value)


class NoChoiceServer(OneChoiceServer):
    def generate(self, requests: list[Request]) -> list[list[Completion]]:
        return [[] for _ in requests]


def test_fanout_with_no_completion_is_a_user_error() -> None:
    with pytest.raises(UserError, match="no completion for a single-choice request"):
        SampleFanOut(NoChoiceServer(), "fanout").generate(requests())
