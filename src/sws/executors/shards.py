"""Completion shards under the run directory: how a step's requests are resumed on a cluster.

The request cache is a sqlite file on the driver's disk, which cluster workers cannot share; so a step's
requests are cut into shards, and a worker writes each shard's completions as `<name>.parquet` (atomically)
and then a marker `<name>.done`. A shard's name hashes the engine identity and its requests' cache keys, so
it names what was asked, not where: a rerun after a killed driver finds the shards that have a marker and
asks only the others, and a retried task rewrites the same file instead of adding rows.
The driver writes each shard's requests to `<name>.requests.jsonl` first, so the cluster reads them from the
shared run directory rather than through the driver's memory.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from pathlib import Path
from typing import Any

import polars as pl

from sws.atomic_files import write_parquet, write_text
from sws.engines.base import Completion, Request
from sws.engines.cache import request_key
from sws.run_dir import RunDir
from sws.tables import read_parquet

COMPLETION_SCHEMA = {"index": pl.Int64, "texts": pl.List(pl.Utf8), "tokens": pl.List(pl.Int64),
                     "finish_reasons": pl.List(pl.Utf8), "prompt_tokens": pl.List(pl.Int64)}


def shards_dir(run_dir: Path) -> Path:
    return RunDir(Path(run_dir).resolve()).shards


@dataclass(frozen=True)
class Shard:
    """`size` requests starting at `start` in the step's request list, stored under `folder` as `name`."""

    folder: Path
    name: str
    start: int
    size: int

    @property
    def requests_path(self) -> Path:
        return self.folder / f"{self.name}.requests.jsonl"

    @property
    def completions_path(self) -> Path:
        return self.folder / f"{self.name}.parquet"

    @property
    def marker_path(self) -> Path:
        return self.folder / f"{self.name}.done"

    @property
    def done(self) -> bool:
        return self.marker_path.exists() and self.completions_path.exists()


def plan_shards(folder: Path, identity: dict[str, Any], requests: Iterable[Request], shard_size: int) -> list[Shard]:
    """The step's shards, `shard_size` requests each; each shard's requests file is written unless it is done.

    The requests are read one shard at a time, so a generator of them is never held whole.
    """
    shards: list[Shard] = []
    remaining = iter(requests)
    start = 0
    while chunk := list(islice(remaining, shard_size)):
        digest = hashlib.sha256()
        for request in chunk:
            digest.update(request_key(identity, request).encode())
        shard = Shard(folder, digest.hexdigest()[:24], start, len(chunk))
        if not shard.done and not shard.requests_path.exists():
            write_text(shard.requests_path, "".join(encode_request(request) + "\n" for request in chunk))
        shards.append(shard)
        start += len(chunk)
    return shards


def encode_request(request: Request) -> str:
    return json.dumps(dataclasses.asdict(request), sort_keys=True)


def decode_request(line: str) -> Request:
    fields = json.loads(line)
    return Request(**{**fields, "messages": tuple(fields["messages"]) if fields["messages"] is not None else None})


def read_requests(shard: Shard) -> list[Request]:
    return [decode_request(line) for line in shard.requests_path.read_text().splitlines() if line]


def write_completions(shard: Shard, completions: list[list[Completion]]) -> None:
    """The shard's completions, then its marker: a marker only ever stands beside a whole shard."""
    table = pl.DataFrame({
        "index": list(range(shard.start, shard.start + len(completions))),
        "texts": [[c.text for c in samples] for samples in completions],
        "tokens": [[c.tokens for c in samples] for samples in completions],
        "finish_reasons": [[c.finish_reason for c in samples] for samples in completions],
        "prompt_tokens": [[c.prompt_tokens for c in samples] for samples in completions],
    }, schema=COMPLETION_SCHEMA)
    write_parquet(table, shard.completions_path)
    write_text(shard.marker_path, json.dumps({"requests": len(completions)}) + "\n")
    shard.requests_path.unlink(missing_ok=True)


def read_completions(shards: Sequence[Shard]) -> Iterator[list[Completion]]:
    """Every request's completions in request order, one shard in memory at a time."""
    for shard in shards:
        table = read_parquet(shard.completions_path)
        if table.height != shard.size or table["index"].to_list() != list(range(shard.start, shard.start + shard.size)):
            raise RuntimeError(f"{shard.completions_path}: holds {table.height} rows, expected requests "
                               f"{shard.start}..{shard.start + shard.size - 1}; delete it and its .done marker")
        if "prompt_tokens" not in table.columns:  # a shard written before prompt tokens were recorded
            table = table.with_columns(pl.col("tokens").list.eval(pl.lit(0, pl.Int64)).alias("prompt_tokens"))
        for texts, tokens, reasons, prompts in table.select("texts", "tokens", "finish_reasons",
                                                            "prompt_tokens").iter_rows():
            yield [Completion(text, count, reason, prompt) for text, count, reason, prompt
                   in zip(texts, tokens, reasons, prompts, strict=True)]


def shard_tokens(role: str, shards: Sequence[Shard]) -> dict[str, dict[str, int]]:
    """The token counts of finished shards' completions, as `sws.tokens` counts them for `role`."""
    counts = {"prompt": 0, "completion": 0, "completions": 0}
    for shard in shards:
        table = read_parquet(shard.completions_path)
        completion = table["tokens"].explode().drop_nulls()
        counts["completion"] += int(completion.sum())
        counts["completions"] += completion.len()
        if "prompt_tokens" in table.columns:
            counts["prompt"] += int(table["prompt_tokens"].explode().drop_nulls().sum())
    return {role: counts}
