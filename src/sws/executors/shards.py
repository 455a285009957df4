"""Completion shards under the run directory: how a step's requests are resumed on a cluster.

The request cache is a sqlite file on the driver's disk, which cluster workers cannot share; so a step's
requests are cut into shards, and a worker writes each shard's completions as `<name>.parquet` (atomically)
and then a marker `<name>.done`. A shard's name hashes the engine identity and its requests' cache keys, so
it names what was asked, not where: a rerun after a killed driver finds the shards that have a marker and
asks only the others, and a retried task rewrites the same file instead of adding rows.
The driver writes each shard's requests to `<name>.requests.jsonl` first, so the cluster reads them from the
shared run directory rather than through the driver's memory.
A shard is trusted only whole: its marker records the SHA-256 of its Parquet file, and its rows must be the
shard's requests, each with as many texts, token counts and finish reasons, none missing. A planned shard that
fails either check is said in one line and asked again; one that fails when read is one error line.
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

from sws import ui
from sws.atomic_files import write_parquet, write_text
from sws.engines.base import Completion, Request
from sws.engines.cache import request_key
from sws.errors import UserError
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
        if shard.done:
            distrust_if_damaged(shard)
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
    marker = {"requests": len(completions), "sha256": file_digest(shard.completions_path)}
    write_text(shard.marker_path, json.dumps(marker) + "\n")
    shard.requests_path.unlink(missing_ok=True)


def read_completions(shards: Sequence[Shard]) -> Iterator[list[Completion]]:
    """Every request's completions in request order, one shard in memory at a time."""
    for shard in shards:
        table, problem = checked_table(shard)
        if table is None:
            raise UserError(f"{shard.completions_path}: {problem}; delete it and its .done marker, then rerun")
        for texts, tokens, reasons, prompts in table.select("texts", "tokens", "finish_reasons",
                                                            "prompt_tokens").iter_rows():
            yield [Completion(text, count, reason, prompt) for text, count, reason, prompt
                   in zip(texts, tokens, reasons, prompts, strict=True)]


def distrust_if_damaged(shard: Shard) -> None:
    """Remove a finished shard that fails `checked_table`, saying so, so that its requests are asked again."""
    _, problem = checked_table(shard)
    if problem is not None:
        ui.info(f"{shard.completions_path}: {problem}; not trusted, asking its {shard.size} requests again")
        shard.marker_path.unlink(missing_ok=True)
        shard.completions_path.unlink(missing_ok=True)


def checked_table(shard: Shard) -> tuple[pl.DataFrame | None, str | None]:
    """The shard's completions table, or None and what is wrong with it."""
    if not shard.completions_path.is_file():
        return None, "missing"
    recorded = _recorded_digest(shard.marker_path)
    if recorded is not None and recorded != file_digest(shard.completions_path):
        return None, "its bytes are not those its .done marker records"
    try:
        table = read_parquet(shard.completions_path)
    except UserError:
        return None, "not a readable Parquet file"
    if "prompt_tokens" not in table.columns and "tokens" in table.columns:  # written before prompt tokens were
        table = table.with_columns(pl.col("tokens").list.eval(pl.lit(0, pl.Int64)).alias("prompt_tokens"))
    wrong = [name for name, dtype in COMPLETION_SCHEMA.items() if table.schema.get(name) != dtype]
    if wrong:
        return None, f"column '{wrong[0]}' missing or not of type {COMPLETION_SCHEMA[wrong[0]]}"
    if table.height != shard.size or table["index"].to_list() != list(range(shard.start, shard.start + shard.size)):
        return None, (f"holds {table.height} rows, expected requests {shard.start}..{shard.start + shard.size - 1}")
    lists = ("texts", "tokens", "finish_reasons", "prompt_tokens")
    lengths = table.select([pl.col(name).list.len().alias(name) for name in lists])
    ragged = lengths.select(pl.any_horizontal([pl.col(name).is_null() | (pl.col(name) != pl.col("texts"))
                                                for name in lists]) | (pl.col("texts") == 0)).to_series()
    missing = table.select(pl.any_horizontal([pl.col(name).list.eval(pl.element().is_null()).list.any()
                                               for name in ("texts", "tokens", "prompt_tokens")])).to_series()
    bad = (ragged | missing.fill_null(True)).arg_true()
    if len(bad):
        return None, f"the row of request {shard.start + int(bad[0])} has missing or ragged samples"
    return table, None


def _recorded_digest(marker: Path) -> str | None:
    """The SHA-256 a marker records; None for a marker written before digests were recorded, or none at all
    (a shard read before its marker, as a retried task does); "" for a marker that is not sws's."""
    if not marker.is_file():
        return None
    try:
        recorded = json.loads(marker.read_text())
    except (OSError, UnicodeDecodeError, ValueError):
        return ""
    digest = recorded.get("sha256") if isinstance(recorded, dict) else ""
    return digest if isinstance(digest, str) or digest is None else ""


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


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
