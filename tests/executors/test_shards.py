from __future__ import annotations

import json

import polars as pl
import pytest

from sws.engines.base import Completion, Request
from sws.errors import UserError
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

    with pytest.raises(UserError, match="expected requests 2..3"):
        list(read_completions(shards))


def finished(tmp_path, count: int = 4):
    asked = requests(count)
    shards = plan_shards(tmp_path, IDENTITY, asked, shard_size=2)
    for shard in shards:
        write_completions(shard, answers(read_requests(shard)))
    return asked, shards


def rewrite(shard, edit) -> None:
    """Plant a damaged table, its marker left as it was."""
    table = pl.read_parquet(shard.completions_path)
    edit(table).write_parquet(shard.completions_path)


@pytest.mark.parametrize("damage", [
    lambda table: table.head(1),  # a missing row
    lambda table: table.with_columns(pl.Series("tokens", [[3], [3, 3]])),  # ragged: fewer counts than texts
    lambda table: table.with_columns(pl.Series("texts", [[None, "x"], ["a", "b"]], dtype=pl.List(pl.Utf8))),
    lambda table: table.drop("texts"),
])
@pytest.mark.parametrize("old_marker", [False, True])  # an old marker records no digest: the rows are checked
def test_a_damaged_shard_is_said_in_one_line_and_asked_again(tmp_path, capsys, damage, old_marker):
    asked, shards = finished(tmp_path)
    rewrite(shards[1], damage)
    if old_marker:
        shards[1].marker_path.write_text(json.dumps({"requests": 2}) + "\n")

    again = plan_shards(tmp_path, IDENTITY, asked, shard_size=2)
    assert [shard.done for shard in again] == [True, False]
    assert read_requests(again[1]) == asked[2:]
    said = "".join(capsys.readouterr().err.split())  # the console wraps long lines anywhere
    assert said.count(shards[1].completions_path.name) == 1 and said.endswith("askingits2requestsagain")


def test_a_tampered_shard_of_the_right_shape_is_caught_by_its_digest(tmp_path):
    asked, shards = finished(tmp_path)
    rewrite(shards[0], lambda table: table.with_columns(pl.Series("texts", [["", ""], ["", ""]])))
    again = plan_shards(tmp_path, IDENTITY, asked, shard_size=2)
    assert [shard.done for shard in again] == [False, True]


def test_a_shard_damaged_after_planning_is_one_error_line_naming_it(tmp_path):
    _, shards = finished(tmp_path)
    rewrite(shards[0], lambda table: table.with_columns(pl.Series("tokens", [[3], [3, 3]])))
    with pytest.raises(UserError, match=f"{shards[0].completions_path}: .*delete it and its .done marker"):
        list(read_completions(shards))


def test_a_shard_of_an_older_marker_is_checked_by_its_rows(tmp_path):
    asked, shards = finished(tmp_path)
    for shard in shards:
        shard.marker_path.write_text(json.dumps({"requests": 2}) + "\n")
    assert all(shard.done for shard in plan_shards(tmp_path, IDENTITY, asked, shard_size=2))
    assert list(read_completions(shards)) == answers(asked)
