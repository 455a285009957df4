from pathlib import Path

import pytest

import sws.engines
from sws import tokens
from sws.config import EngineConfig, PipelineConfig
from sws.engines import Request
from sws.errors import UserError
from sws.executors import executor_for
from sws.executors.shards import shards_dir
from sws.run_dir import RunDir
from sws.worlds.arith.world import ORACLE


def label_requests(count: int) -> list[Request]:
    return [Request(messages=({"role": "user", "content": f"label {i}"},), n=2, seed=i, task="label",
                    fields={"problem": f"Compute {i}+{i + 1}."}) for i in range(count)]


def test_a_rerun_reads_the_finished_shards_without_an_engine_or_a_cache(tmp_path: Path, monkeypatch) -> None:
    executor = executor_for(PipelineConfig(), tmp_path)
    role = EngineConfig(**ORACLE)
    first = executor.complete("labeler", role, label_requests(7), shard_size=3, description="label")
    assert len(list(shards_dir(tmp_path).glob("*.done"))) == 3

    RunDir(tmp_path).request_cache.unlink()

    def no_engine(*args, **kwargs):
        raise AssertionError("a finished shard asked the engine again")

    monkeypatch.setattr(sws.engines, "make_engine", no_engine)
    assert executor.complete("labeler", role, label_requests(7), shard_size=3, description="label") == first


def test_a_damaged_cache_is_said_even_when_the_shards_answer_every_request(tmp_path: Path) -> None:
    executor = executor_for(PipelineConfig(), tmp_path)
    role = EngineConfig(**ORACLE)
    executor.complete("labeler", role, label_requests(4), shard_size=2, description="label")
    cache = RunDir(tmp_path).request_cache
    cache.write_bytes(cache.read_bytes()[:100] + b"\0" * 4000)
    with pytest.raises(UserError, match=rf"^{cache}: damaged request cache \(.+\); move it away and rerun$"):
        executor.complete("labeler", role, label_requests(4), shard_size=2, description="label")


def test_a_shard_without_its_marker_is_asked_again(tmp_path: Path) -> None:
    executor = executor_for(PipelineConfig(), tmp_path)
    role = EngineConfig(**ORACLE)
    first = executor.complete("labeler", role, label_requests(4), shard_size=2, description="label")
    marker = sorted(shards_dir(tmp_path).glob("*.done"))[0]
    marker.unlink()
    assert executor.complete("labeler", role, label_requests(4), shard_size=2, description="label") == first
    assert marker.exists()


def test_no_requests_write_no_shard(tmp_path: Path) -> None:
    executor = executor_for(PipelineConfig(), tmp_path)
    assert executor.complete("labeler", EngineConfig(**ORACLE), [], 3, "label") == []
    assert not list(shards_dir(tmp_path).glob("*.done"))


def test_under_a_cap_the_shards_run_one_at_a_time_until_it_is_reached(tmp_path: Path) -> None:
    executor = executor_for(PipelineConfig(), tmp_path)
    role = EngineConfig(**ORACLE)
    whole = executor_for(PipelineConfig(), tmp_path / "whole").complete("labeler", role, label_requests(8), 2, "label")
    per_shard = [sum(c.tokens + c.prompt_tokens for answers in whole[start:start + 2] for c in answers)
                 for start in range(0, 8, 2)]
    cap = tokens.Cap(max_tokens=per_shard[0] + 1, max_cost=None, pricing={})
    with tokens.capped(cap), pytest.raises(tokens.CapReached):
        executor.complete("labeler", role, label_requests(8), shard_size=2, description="label")
    assert len(list(shards_dir(tmp_path).glob("*.done"))) == 2  # the shard that passed the cap was finished
    assert tokens.total_tokens(cap.spent) == sum(per_shard[:2])
    cap = tokens.Cap(max_tokens=sum(per_shard) + 1, max_cost=None, pricing={})
    with tokens.capped(cap):
        assert executor.complete("labeler", role, label_requests(8), shard_size=2, description="label") == whole
    assert tokens.total_tokens(cap.spent) == sum(per_shard)
