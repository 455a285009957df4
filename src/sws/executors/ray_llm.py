"""GPU vLLM teachers and OpenAI-compatible endpoints on Ray, through `ray.data.llm` (Ray 2.60).

`vLLMEngineProcessorConfig` runs `executor.roles.<role>.replicas` vLLM engines (engine option
`tensor_parallel_size` GPUs each) for the whole step; `HttpRequestProcessorConfig` sends to the role's
`base_url` at most `max_concurrency` requests per second (chat messages to /chat/completions, raw prompts to
/completions, as the local openai engine sends them). Both answer one sample per row, so a request for n
samples becomes n rows (seed + sample index); the rows are then grouped back by shard and written as the same
completion shards the actor-pool path writes (`sws.executors.shards`). vLLM reports no finish reason through
this API, so a sample that used all its max_tokens counts as cut off.

This path needs `ray[llm]` and GPUs (or a live endpoint); the CPU tests check only that its configs build.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pandas as pd

from sws.config import EngineConfig, RoleResources
from sws.engines.base import CUT_OFF, FINISHED, Completion, read_chat_template
from sws.errors import UserError
from sws.executors.shards import Shard, read_requests, write_completions

# Engine options of the sws vLLM engine that are not vLLM engine arguments.
NOT_ENGINE_KWARGS = {"chat_template", "n_mode", "batch_size"}


def processor_config(role: EngineConfig, resources: RoleResources, chat: bool = True) -> Any:
    """The `ray.data.llm` processor config for a GPU vLLM role or an OpenAI-compatible endpoint; `chat`: the
    requests are chat messages (vLLM applies the model's chat template), else raw prompts."""
    try:
        from ray.data.llm import HttpRequestProcessorConfig, vLLMEngineProcessorConfig
    except ImportError as exc:
        raise UserError(f"engine '{role.engine}' on Ray needs ray.data.llm ({exc}); `pip install 'ray[llm]'` on "
                        "the GPU nodes, or set executor.kind: local") from None
    options = role.options
    if role.engine == "vllm":
        return vLLMEngineProcessorConfig(
            model_source=role.model, concurrency=resources.replicas,
            batch_size=int(options.get("batch_size", 64)),
            engine_kwargs={name: value for name, value in options.items() if name not in NOT_ENGINE_KWARGS},
            chat_template_stage={"enabled": chat, "chat_template": read_chat_template(options.get("chat_template"))},
        )
    base_url = options.get("base_url") or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
    key = os.environ.get(options.get("api_key_env", "OPENAI_API_KEY"), "")
    return HttpRequestProcessorConfig(
        url=f"{base_url.rstrip('/')}/{'chat/completions' if chat else 'completions'}", headers={"Authorization": f"Bearer {key}"},
        qps=int(options.get("max_concurrency", 16)), max_retries=int(options.get("max_retries", 3)),
        concurrency=resources.replicas,
    )


def complete_with_ray_llm(shards: Any, role: EngineConfig, resources: RoleResources, folder: str, chat: bool) -> Any:
    """The dataset of shard names that, once iterated, has written every shard's completions."""
    from ray.data.llm import build_processor

    vllm = role.engine == "vllm"
    processor = build_processor(
        processor_config(role, resources, chat),
        preprocess=vllm_row if vllm else (lambda row: http_row(row, role.model)),
        postprocess=vllm_answer if vllm else http_answer,
    )
    samples = shards.flat_map(sample_rows, fn_kwargs={"folder": folder})
    return processor(samples).groupby("name").map_groups(write_group, fn_kwargs={"folder": folder},
                                                         batch_format="pandas")


def sample_rows(shard: dict[str, Any], folder: str) -> list[dict[str, Any]]:
    """One row per sample of every request of a shard."""
    requests = read_requests(Shard(Path(folder), shard["name"], shard["start"], shard["size"]))
    return [
        {**shard, "index": shard["start"] + offset, "sample": sample,
         "messages": list(request.messages or ()), "prompt_text": request.prompt,
         "sampling": {"temperature": request.temperature, "top_p": request.top_p, "max_tokens": request.max_tokens,
                      "stop": list(request.stop) or None,
                      "seed": None if request.seed is None else request.seed + sample}}
        for offset, request in enumerate(requests) for sample in range(request.n)
    ]


def vllm_row(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "sampling_params": row["sampling"],
            **({"messages": row["messages"]} if row["messages"] else {"prompt": row["prompt_text"]})}


def vllm_answer(row: dict[str, Any]) -> dict[str, Any]:
    tokens = int(row["num_generated_tokens"])
    return {**answer_columns(row), "text": row["generated_text"], "tokens": tokens,
            "finish_reason": CUT_OFF if tokens >= row["sampling"]["max_tokens"] else FINISHED}


def http_row(row: dict[str, Any], model: str) -> dict[str, Any]:
    sampling = {name: value for name, value in row["sampling"].items() if value is not None}
    prompt = {"messages": row["messages"]} if row["messages"] else {"prompt": row["prompt_text"]}
    return {**row, "payload": {"model": model, **prompt, **sampling}}


def http_answer(row: dict[str, Any]) -> dict[str, Any]:
    choice = row["http_response"]["choices"][0]
    usage = row["http_response"].get("usage") or {}
    text = choice["message"]["content"] if "message" in choice else choice.get("text")
    return {**answer_columns(row), "text": text or "",
            "tokens": int(usage.get("completion_tokens", 0)), "finish_reason": choice.get("finish_reason") or FINISHED}


def answer_columns(row: dict[str, Any]) -> dict[str, Any]:
    return {name: row[name] for name in ("name", "start", "size", "index", "sample")}


def write_group(group: pd.DataFrame, folder: str) -> pd.DataFrame:
    """Write one shard's sample rows back as its completions (request order, sample order) and its marker."""
    group = group.sort_values(["index", "sample"])
    first = group.iloc[0]
    shard = Shard(Path(folder), str(first["name"]), int(first["start"]), int(first["size"]))
    completions: list[list[Completion]] = [[] for _ in range(shard.size)]
    for index, text, tokens, reason in group[["index", "text", "tokens", "finish_reason"]].itertuples(index=False):
        completions[int(index) - shard.start].append(Completion(str(text), int(tokens), str(reason)))
    write_completions(shard, completions)
    return pd.DataFrame({"name": [shard.name]})
