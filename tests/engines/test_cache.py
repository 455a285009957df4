from __future__ import annotations

import multiprocessing
from collections.abc import Iterator
from pathlib import Path

import pytest

from sws import ui
from sws.config import EngineConfig
from sws.engines.base import Completion, Engine, Request
from sws.engines.cache import CachedEngine, cache_identity, request_key, tally
from sws.errors import UserError

IDENTITY = {"engine": "counting", "model": "echo", "model_fingerprint": None, "options": {}}


class CountingEngine(Engine):
    """Answers deterministically from the request and counts every request it is sent; can die after k calls."""

    name = "counting"
    model = "echo"

    def __init__(self, die_after_calls: int | None = None) -> None:
        self.die_after_calls = die_after_calls
        self.calls = 0
        self.sent: list[Request] = []
        self.closed = False

    def generate(self, requests: list[Request]) -> list[list[Completion]]:
        if self.die_after_calls is not None and self.calls >= self.die_after_calls:
            raise RuntimeError("killed")
        self.calls += 1
        self.sent.extend(requests)
        return [answer(request) for request in requests]

    def close(self) -> None:
        self.closed = True


class StreamingCountingEngine(CountingEngine):
    """Hands over finished requests one by one, and dies after `die_after_requests` of them."""

    def __init__(self, die_after_requests: int | None = None) -> None:
        super().__init__()
        self.die_after_requests = die_after_requests

    def generate_iter(self, requests: list[Request]) -> Iterator[tuple[int, list[Completion]]]:
        for index, request in enumerate(requests):
            if self.die_after_requests is not None and len(self.sent) >= self.die_after_requests:
                raise RuntimeError("killed")
            self.sent.append(request)
            yield index, answer(request)


def answer(request: Request) -> list[Completion]:
    text = request.prompt if request.prompt is not None else request.messages[-1]["content"]
    return [Completion(text=f"{text}|seed={request.seed}|t={request.temperature}|{i}", tokens=i + 1)
            for i in range(request.n)]


def shards(count: int = 12, shard_size: int = 4) -> list[list[Request]]:
    requests = [Request(prompt=f"problem {i}", n=3, seed=i) for i in range(count)]
    return [requests[start:start + shard_size] for start in range(0, count, shard_size)]


def run_stage(engine: CachedEngine) -> list[list[Completion]]:
    """What a stage does: one generate call per shard."""
    return [completions for shard in shards() for completions in engine.generate(shard)]


def test_a_killed_run_resumes_without_repeating_any_call(tmp_path: Path) -> None:
    db = tmp_path / "requests.sqlite"
    dying = CountingEngine(die_after_calls=2)
    with pytest.raises(RuntimeError, match="killed"):
        run_stage(CachedEngine(dying, db, IDENTITY))

    rerun = CountingEngine()
    resumed = run_stage(CachedEngine(rerun, db, IDENTITY))

    assert len(dying.sent) == 8 and len(rerun.sent) == 4
    assert not {r.prompt for r in dying.sent} & {r.prompt for r in rerun.sent}
    assert resumed == run_stage(CachedEngine(CountingEngine(), tmp_path / "clean.sqlite", IDENTITY))


def test_a_streaming_engine_loses_no_finished_request_when_killed_midway(tmp_path: Path) -> None:
    db = tmp_path / "requests.sqlite"
    requests = [Request(prompt=f"problem {i}", n=2, seed=i) for i in range(10)]
    dying = StreamingCountingEngine(die_after_requests=7)
    with pytest.raises(RuntimeError, match="killed"):
        CachedEngine(dying, db, IDENTITY).generate(requests)

    rerun = StreamingCountingEngine()
    results = CachedEngine(rerun, db, IDENTITY).generate(requests)

    assert [r.prompt for r in rerun.sent] == ["problem 7", "problem 8", "problem 9"]
    assert results == [answer(request) for request in requests]


def test_completions_come_back_in_request_order_and_hit_rate_is_counted(tmp_path: Path) -> None:
    db = tmp_path / "requests.sqlite"
    first = [Request(prompt="a", n=2, seed=1), Request(prompt="b", n=3, seed=1)]
    CachedEngine(CountingEngine(), db, IDENTITY).generate(first)

    engine = CachedEngine(CountingEngine(), db, IDENTITY)
    mixed = [Request(prompt="c", n=1, seed=1), first[1], first[0]]
    results = engine.generate(mixed)

    assert results == [answer(request) for request in mixed]
    assert (engine.hits, engine.misses) == (5, 1)
    assert engine.hit_rate == pytest.approx(5 / 6)


def test_a_tally_counts_the_hits_and_misses_of_every_engine_in_its_block(tmp_path: Path,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "requests.sqlite"
    requests = [Request(prompt="a", n=2), Request(prompt="b", n=2)]
    CachedEngine(CountingEngine(), db, IDENTITY).generate(requests[:1])
    capsys.readouterr()
    with tally() as counts:
        for _ in range(2):
            CachedEngine(CountingEngine(), db, IDENTITY).generate(requests)
    assert counts == [6, 2]
    assert "request cache" not in capsys.readouterr().err  # one line per stage, from the runner


def test_with_verbose_each_batch_reports_its_cache_use(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "requests.sqlite"
    requests = [Request(prompt="a", n=2), Request(prompt="b", n=2)]
    CachedEngine(CountingEngine(), db, IDENTITY).generate(requests[:1])
    capsys.readouterr()
    ui.set_verbosity(quiet=False, verbose=True)
    try:
        CachedEngine(CountingEngine(), db, IDENTITY).generate(requests)
    finally:
        ui.set_verbosity(quiet=False)
    assert "2/4 completions reused (50%)" in capsys.readouterr().err


def test_identical_requests_in_one_batch_are_sent_once(tmp_path: Path) -> None:
    inner = CountingEngine()
    request = Request(messages=({"role": "user", "content": "hi"},), n=2, seed=3)
    results = CachedEngine(inner, tmp_path / "requests.sqlite", IDENTITY).generate([request, request])
    assert len(inner.sent) == 1
    assert results == [answer(request), answer(request)]


@pytest.mark.parametrize("changed", [
    Request(prompt="q", n=2, seed=2),
    Request(prompt="q", n=2, seed=1, temperature=0.5),
    Request(prompt="q", n=2, seed=1, top_p=0.9),
    Request(prompt="q", n=2, seed=1, max_tokens=7),
    Request(prompt="q", n=2, seed=1, stop=("\n",)),
    Request(prompt="q", n=3, seed=1),
    Request(prompt="q ", n=2, seed=1),
    Request(messages=({"role": "user", "content": "q"},), n=2, seed=1),
])
def test_anything_that_changes_the_output_is_a_cache_miss(tmp_path: Path, changed: Request) -> None:
    db = tmp_path / "requests.sqlite"
    CachedEngine(CountingEngine(), db, IDENTITY).generate([Request(prompt="q", n=2, seed=1)])
    inner = CountingEngine()
    CachedEngine(inner, db, IDENTITY).generate([changed])
    assert inner.sent == [changed]


def test_template_metadata_is_not_part_of_the_key() -> None:
    plain = Request(prompt="q", seed=1)
    tagged = Request(prompt="q", seed=1, task="rate", fields={"problem": "q"})
    assert request_key(IDENTITY, plain) == request_key(IDENTITY, tagged)


def test_runtime_options_keep_the_key_and_output_options_change_it(tmp_path: Path) -> None:
    base = cache_identity(EngineConfig(engine="vllm", model="m", options={"dtype": "float32"}))
    faster = cache_identity(EngineConfig(
        engine="vllm", model="m", options={"dtype": "float32", "tensor_parallel_size": 4, "enforce_eager": True}))
    other_dtype = cache_identity(EngineConfig(engine="vllm", model="m", options={"dtype": "bfloat16"}))
    other_engine = cache_identity(EngineConfig(engine="hf", model="m", options={"dtype": "float32"}))
    request = Request(prompt="q", seed=1)
    assert request_key(base, request) == request_key(faster, request)
    assert request_key(base, request) != request_key(other_dtype, request)
    assert request_key(base, request) != request_key(other_engine, request)


def test_a_checkpoint_retrained_at_the_same_path_is_not_served_from_the_cache(tmp_path: Path) -> None:
    model_dir = tmp_path / "final"
    model_dir.mkdir()
    (model_dir / "model.safetensors").write_bytes(b"old weights")
    cfg = EngineConfig(engine="hf", model=str(model_dir))
    before = cache_identity(cfg)
    (model_dir / "model.safetensors").write_bytes(b"new weights, retrained")
    assert cache_identity(cfg) != before


def test_a_wrong_number_of_completions_is_an_error(tmp_path: Path) -> None:
    class ShortEngine(CountingEngine):
        def generate(self, requests: list[Request]) -> list[list[Completion]]:
            return [answer(request)[:1] for request in requests]

    with pytest.raises(RuntimeError, match="1 completions for a request with n=2"):
        CachedEngine(ShortEngine(), tmp_path / "requests.sqlite", IDENTITY).generate([Request(prompt="q", n=2)])


def test_close_closes_the_wrapped_engine(tmp_path: Path) -> None:
    inner = CountingEngine()
    CachedEngine(inner, tmp_path / "requests.sqlite", IDENTITY).close()
    assert inner.closed


def _write_many(db: str, offset: int, queue: multiprocessing.Queue) -> None:
    engine = CachedEngine(CountingEngine(), Path(db), IDENTITY)
    try:
        for start in range(0, 200, 10):
            engine.generate([Request(prompt=f"p{offset + i}", n=2, seed=0) for i in range(start, start + 10)])
        queue.put("ok")
    except Exception as exc:  # reported to the parent, which fails the test with it
        queue.put(repr(exc))


def test_concurrent_writers_lose_nothing(tmp_path: Path) -> None:
    db = tmp_path / "requests.sqlite"
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    # Overlapping ranges: both processes write p100..p199.
    writers = [context.Process(target=_write_many, args=(str(db), offset, queue)) for offset in (0, 100)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(timeout=120)
    assert sorted(queue.get(timeout=5) for _ in writers) == ["ok", "ok"]

    reader = CountingEngine()
    CachedEngine(reader, db, IDENTITY).generate([Request(prompt=f"p{i}", n=2, seed=0) for i in range(300)])
    assert reader.sent == []


def test_finish_reasons_are_kept_in_the_cache(tmp_path: Path) -> None:
    class CutOffEngine(CountingEngine):
        def generate(self, requests: list[Request]) -> list[list[Completion]]:
            return [[Completion("half", 5, "length")] * request.n for request in requests]

    request = Request(prompt="q", n=2)
    CachedEngine(CutOffEngine(), tmp_path / "requests.sqlite", IDENTITY).generate([request])
    reader = CountingEngine()
    again = CachedEngine(reader, tmp_path / "requests.sqlite", IDENTITY).generate([request])
    assert reader.sent == [] and all(c.truncated for c in again[0])


def test_rows_of_an_old_cache_without_finish_reason_are_asked_again(tmp_path: Path) -> None:
    import sqlite3

    db = tmp_path / "requests.sqlite"
    request = Request(prompt="q", n=1)
    with sqlite3.connect(db) as old:
        old.execute("CREATE TABLE completions (key TEXT NOT NULL, sample INTEGER NOT NULL, text TEXT NOT NULL, "
                    "tokens INTEGER NOT NULL, PRIMARY KEY (key, sample))")
        old.execute("INSERT INTO completions VALUES (?, 0, 'maybe cut off', 3)", (request_key(IDENTITY, request),))
    engine = CountingEngine()
    result = CachedEngine(engine, db, IDENTITY).generate([request])
    assert engine.sent == [request] and result == [answer(request)]
    reader = CountingEngine()
    assert CachedEngine(reader, db, IDENTITY).generate([request]) == [answer(request)] and reader.sent == []


# ---------------------------------------------------------------- a damaged cache


def filled_cache(path: Path) -> None:
    engine = CachedEngine(CountingEngine(), path, IDENTITY)
    run_stage(engine)
    engine.close()


def truncated(path: Path) -> None:
    filled_cache(path)
    path.write_bytes(path.read_bytes()[:3000])


def garbled(path: Path) -> None:
    filled_cache(path)
    data = bytearray(path.read_bytes())
    data[0:100] = b"\xff" * 100
    path.write_bytes(bytes(data))


def text_file(path: Path) -> None:
    path.write_text("these are my notes\n" * 50)


def folder(path: Path) -> None:
    path.mkdir()


def link(path: Path) -> None:
    (path.parent / "elsewhere.sqlite").write_bytes(b"")
    path.symlink_to(path.parent / "elsewhere.sqlite")


def other_schema(path: Path) -> None:
    import sqlite3

    with sqlite3.connect(path) as other:
        other.execute("CREATE TABLE completions (id INTEGER PRIMARY KEY, payload BLOB)")


def mistyped_rows(path: Path) -> None:
    import sqlite3

    filled_cache(path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE completions SET tokens = 'many', text = x'00ff'")


def edited_text(path: Path) -> None:
    """A row whose text was edited by hand (an answer blanked), its digest left as it was."""
    import sqlite3

    filled_cache(path)
    with sqlite3.connect(path) as db:
        db.execute("UPDATE completions SET text = ''")


@pytest.mark.parametrize("damage", [truncated, garbled, text_file, folder, link, other_schema, mistyped_rows,
                                    edited_text])
def test_a_damaged_cache_is_one_line_that_says_to_move_it_away(tmp_path: Path, damage) -> None:
    path = tmp_path / "requests.sqlite"
    damage(path)
    with pytest.raises(UserError, match=rf"^{path}: damaged request cache \(.+\); move it away and rerun$"):
        engine = CachedEngine(CountingEngine(), path, IDENTITY)
        run_stage(engine)


def test_prompt_tokens_are_kept_and_an_old_cache_gains_the_column(tmp_path: Path) -> None:
    import sqlite3

    class BillingEngine(CountingEngine):
        def generate(self, requests: list[Request]) -> list[list[Completion]]:
            return [[Completion("a", 2, prompt_tokens=9), Completion("b", 3)] for _ in requests]

    db = tmp_path / "requests.sqlite"
    with sqlite3.connect(db) as old:  # a cache from before prompt tokens were recorded
        old.execute("CREATE TABLE completions (key TEXT NOT NULL, sample INTEGER NOT NULL, text TEXT NOT NULL, "
                    "tokens INTEGER NOT NULL, finish_reason TEXT, PRIMARY KEY (key, sample))")
        old.execute("INSERT INTO completions VALUES (?, 0, 'old', 4, 'stop')",
                    (request_key(IDENTITY, Request(prompt="old")),))
    request = Request(prompt="q", n=2)
    CachedEngine(BillingEngine(), db, IDENTITY).generate([request])
    reader = CountingEngine()
    cached = CachedEngine(reader, db, IDENTITY)
    assert cached.generate([request]) == [[Completion("a", 2, prompt_tokens=9), Completion("b", 3)]]
    assert cached.generate([Request(prompt="old")]) == [[Completion("old", 4)]] and reader.sent == []
