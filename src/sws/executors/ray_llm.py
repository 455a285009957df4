"""Engines that `ray.data.llm` runs on a cluster (Ray 2.60): GPU vLLM teachers and OpenAI-compatible endpoints.

Each such engine says how in its own module (`Engine.ray_llm`: the processor config, its request row and its
answer). This module feeds the processor one row per sample (a request for n samples becomes n rows, seeds
seed + sample index), groups the answers back by shard and writes them as the same completion shards the
worker actors write (`sws.executors.shards`).

This path needs `ray[llm]` and GPUs (or a live endpoint); the CPU tests check that its configs build and run
the HTTP path against a local server.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd

from sws.engines.base import Completion, RayLLM
from sws.executors.shards import Shard, read_requests, write_completions


def complete_with_ray_llm(shards: Any, adapter: RayLLM, folder: str) -> Any:
    """The dataset of shard names that, once iterated, has written every shard's completions."""
    from ray.data.llm import build_processor

    processor = build_processor(adapter.config, preprocess=adapter.preprocess,
                                postprocess=functools.partial(with_shard_columns, answer=adapter.answer))
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


def with_shard_columns(row: dict[str, Any], answer: Callable[[dict[str, Any]], dict[str, Any]]) -> dict[str, Any]:
    """The engine's answer, with the columns that place it in its shard."""
    return {**{name: row[name] for name in ("name", "start", "size", "index", "sample")}, **answer(row)}


def write_group(group: pd.DataFrame, folder: str) -> pd.DataFrame:
    """Write one shard's sample rows back as its completions (request order, sample order) and its marker."""
    group = group.sort_values(["index", "sample"])
    first = group.iloc[0]
    shard = Shard(Path(folder), str(first["name"]), int(first["start"]), int(first["size"]))
    completions: list[list[Completion]] = [[] for _ in range(shard.size)]
    columns = ["index", "text", "tokens", "finish_reason", "prompt_tokens"]
    for index, text, tokens, reason, prompt in group[columns].itertuples(index=False):
        completions[int(index) - shard.start].append(Completion(str(text), int(tokens), str(reason), int(prompt)))
    write_completions(shard, completions)
    return pd.DataFrame({"name": [shard.name]})
