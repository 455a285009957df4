from __future__ import annotations

import pytest

from sws.engines.base import Completion, Request
from sws.executors.shards import plan_shards, read_completions, read_requests, write_completions

IDENTITY = {"engine": "oracle", "model": "arith-oracle", "options": {}}


def requests(count: int, seed: int = 0) -> list[Request]:
    return [Request(prompt=f"Compute {i}+1.\n", n=2, seed=seed + i, task="answer", fields={"problem": f"{i}+1"})
            for i in range(count)]


def answers(shard_requests: list[Request]) -> list[list[Completion]]:
    return [[Completion(f"{r.prompt} sample {s}", 3, "stop" if s else "length") for s in range(r.n)]
            for r in shard_requests]


def test_shards_cover_the_requests_in_order_and_read_back_what_was_written(tmp_path):
    asked = requests(7)
    shards = plan_shards(tmp_path, IDENTITY, asked, shard_size=3)

    assert [(shard.start, shard.size) for shard in shards] == [(0, 3), (3, 3), (6, 1)]
    assert [request for shard in shards for request in read_requests(shard)] == asked
    for shard in shards:
        write_completions(shard, answers(read_requests(shard)))

    assert all(shard.done for shard in shards)
    assert list(read_completions(shards)) == answers(asked)


def test_a_shard_is_named_by_what_it_asks_so_a_replan_finds_the_finished_ones(tmp_path):
    asked = requests(6)
    first = plan_shards(tmp_path, IDENTITY, asked, shard_size=3)
    write_completions(first[0], answers(asked[:3]))

    again = plan_shards(tmp_path, IDENTITY, asked, shard_size=3)
    changed = plan_shards(tmp_path, IDENTITY, requests(6, seed=1), shard_size=3)
    other_model = plan_shards(tmp_path, {**IDENTITY, "model": "other"}, asked, shard_size=3)

    assert [shard.done for shard in again] == [True, False]
    assert not any(shard.done for shard in changed + other_model)


def test_a_shard_file_holding_other_rows_is_refused(tmp_path):
    asked = requests(4)
    shards = plan_shards(tmp_path, IDENTITY, asked, shard_size=2)
    write_completions(shards[0], answers(asked[:2]))
    shards[0].completions_path.replace(shards[1].completions_path)
    write_completions(shards[0], answers(asked[:2]))

    with pytest.raises(RuntimeError, match="expected requests 2..3"):
        list(read_completions(shards))
