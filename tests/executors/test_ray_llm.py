"""The `ray.data.llm` path: OpenAI-compatible endpoints run for real against a local server; GPU vLLM teachers
cannot run here (no GPU), so those tests check that the processor builds as Ray documents it, and that the rows
it returns are written back as the completion shards the executor reads."""

from __future__ import annotations

import time

import pandas as pd
import pytest
from _openai_server import serving

from sws.config import EngineConfig, PipelineConfig
from sws.engines.base import Completion, Request
from sws.engines.bounded_reply import size_bound
from sws.engines.openai import OpenAIEngine
from sws.engines.vllm import VllmEngine
from sws.errors import UserError
from sws.executors.ray_executor import RayExecutor
from sws.executors.ray_llm import sample_rows, with_shard_columns, write_group
from sws.executors.shards import plan_shards, read_completions

llm = pytest.importorskip("ray.data.llm")

VLLM_ROLE = EngineConfig(engine="vllm", model="org/teacher-70b", max_tokens=6,
                         options={"tensor_parallel_size": 4, "max_model_len": 8192})
OPENAI_ROLE = EngineConfig(engine="openai", model="teacher",
                           options={"base_url": "http://head:8000/v1/", "max_concurrency": 32})


def test_a_gpu_vllm_role_becomes_replicas_of_tensor_parallel_engines(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    adapter = VllmEngine.ray_llm(VLLM_ROLE, replicas=3, gpus=4, chat=True)
    config = adapter.config

    assert isinstance(config, llm.vLLMEngineProcessorConfig)
    assert config.concurrency == 3 and config.model_source == "org/teacher-70b"
    assert config.engine_kwargs["tensor_parallel_size"] == 4 and config.engine_kwargs["max_model_len"] == 8192
    assert llm.build_processor(config, preprocess=adapter.preprocess, postprocess=adapter.answer) is not None


def test_a_vllm_role_without_gpus_runs_on_worker_actors():
    assert VllmEngine.ray_llm(VLLM_ROLE, replicas=3, gpus=0, chat=True) is None


def test_an_openai_role_becomes_an_http_processor_within_its_concurrency_limit():
    adapter = OpenAIEngine.ray_llm(OPENAI_ROLE, replicas=2, gpus=0, chat=True)
    config = adapter.config

    assert isinstance(config, llm.HttpRequestProcessorConfig)
    assert config.url == "http://head:8000/v1/chat/completions"
    assert config.qps == 32 and config.concurrency == 2
    assert llm.build_processor(config, preprocess=adapter.preprocess, postprocess=adapter.answer)


def test_vllm_rows_one_per_sample_are_written_back_as_the_shards_completions(tmp_path):
    requests = [Request(messages=({"role": "user", "content": f"Q{i}"},), n=2, max_tokens=6, seed=10 * i)
                for i in range(3)]
    [shard] = plan_shards(tmp_path, {"engine": "vllm"}, requests, shard_size=3)
    adapter = VllmEngine.ray_llm(VLLM_ROLE, replicas=1, gpus=1, chat=True)
    rows = [adapter.preprocess(row) for row in sample_rows({"name": shard.name, "start": 0, "size": 3},
                                                           str(tmp_path))]
    assert [row["sampling_params"]["seed"] for row in rows] == [0, 1, 10, 11, 20, 21]

    # What the vLLM stage adds to each row; one sample used all its tokens.
    answered = [with_shard_columns({**row, "generated_text": f"{row['messages'][0]['content']}/{row['sample']}",
                                    "num_generated_tokens": 6 if row["index"] == 2 and row["sample"] else 2,
                                    "num_input_tokens": 4},
                                   adapter.answer)
                for row in rows]
    write_group(pd.DataFrame(answered[::-1]), str(tmp_path))

    assert list(read_completions([shard])) == [
        [Completion("Q0/0", 2, prompt_tokens=4), Completion("Q0/1", 2, prompt_tokens=4)],
        [Completion("Q1/0", 2, prompt_tokens=4), Completion("Q1/1", 2, prompt_tokens=4)],
        [Completion("Q2/0", 2, prompt_tokens=4), Completion("Q2/1", 6, "length", 4)],
    ]


def test_an_http_answer_keeps_the_endpoints_text_tokens_and_finish_reason():
    row = {"name": "s", "start": 0, "size": 1, "index": 0, "sample": 0,
           "http_response": {"choices": [{"message": {"content": "42"}, "finish_reason": "length"}],
                             "usage": {"completion_tokens": 7, "prompt_tokens": 5}}}

    answer = OpenAIEngine.ray_llm(OPENAI_ROLE, replicas=1, gpus=0, chat=True).answer
    assert with_shard_columns(row, answer) == {"name": "s", "start": 0, "size": 1, "index": 0, "sample": 0,
                                               "text": "42", "tokens": 7, "prompt_tokens": 5,
                                               "finish_reason": "length"}


def test_a_raw_prompt_goes_to_the_completions_endpoint_and_its_text_comes_back():
    adapter = OpenAIEngine.ray_llm(OPENAI_ROLE, replicas=1, gpus=0, chat=False)
    row = adapter.preprocess({"messages": [], "prompt_text": "2+2=", "sampling": {"max_tokens": 5, "seed": None}})

    assert adapter.config.url == "http://head:8000/v1/completions"
    assert row["payload"] == {"model": "teacher", "prompt": "2+2=", "max_tokens": 5}
    answer = adapter.answer({"http_response": {"choices": [{"text": " 4", "finish_reason": "stop"}]}})
    assert answer["text"] == " 4" and answer["finish_reason"] == "stop"


@pytest.mark.slow
@pytest.mark.parametrize("chat", [True, False], ids=["chat", "raw prompt"])
def test_an_openai_role_on_ray_asks_the_endpoint_once_per_sample_with_consecutive_seeds(
        tmp_path, ray_cluster, monkeypatch, chat):
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")
    requests = [Request(**({"messages": ({"role": "user", "content": f"Q{i}"},)} if chat else {"prompt": f"Q{i}"}),
                        n=2, max_tokens=8, seed=10 * i) for i in range(5)]
    with serving() as server:
        role = EngineConfig(engine="openai", model="fake-model", options={"base_url": server.base_url})
        cfg = PipelineConfig.model_validate({"executor": {"kind": "ray", "address": ray_cluster}})
        completions = RayExecutor(cfg, tmp_path).complete("labeler", role, requests, 2, "ask")
        posts = list(server.posts)

    endpoint = "/v1/chat/completions" if chat else "/v1/completions"
    assert sorted((path, body.get("seed")) for path, body in posts) == sorted(
        (endpoint, 10 * i + sample) for i in range(5) for sample in range(2))
    assert [[completion.text for completion in samples] for samples in completions] == [
        [f"Q{i} -> sample 0 \\boxed{{0}}"] * 2 for i in range(5)]



def ask(session_factory, url: str) -> object:
    """What Ray's HTTP processor does with one reply: post in a session of the factory's, parse the reply."""
    import asyncio

    async def post() -> object:
        async with session_factory() as session, session.post(url, json={"model": "fake-model", "prompt": "Q"}) as reply:
            return await reply.json()

    return asyncio.run(post())


def test_ray_s_http_sessions_for_an_openai_role_abandon_a_flooded_reply_and_one_dripping_its_headers(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")
    with serving() as server:
        role = EngineConfig(engine="openai", model="fake-model", max_tokens=8,
                            options={"base_url": server.base_url, "deadline": 2})
        config = OpenAIEngine.ray_llm(role, replicas=1, gpus=0, chat=False).config
        assert ask(config.session_factory, config.url)["choices"][0]["text"] == "Q -> sample 0 \\boxed{0}"
        server.flood_bytes = 2_000_000
        with pytest.raises(UserError, match=f"sent a reply over {size_bound(8, 1)} bytes"):
            ask(config.session_factory, config.url)
        server.flood_bytes, server.drip_s, server.drip_headers = 0, 0.5, True
        started = time.monotonic()
        with pytest.raises(TimeoutError):  # a timeout Ray's processor retries max_retries times
            ask(config.session_factory, config.url)
        assert time.monotonic() - started < 15  # the headers alone would take the server's 30 s drip limit
