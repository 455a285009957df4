"""Fuzzing what a hostile server, a shared run directory or a crafted file hands to `sws`.

Each case is built here: a local OpenAI-compatible server that answers with something other than a completion,
links planted in a run for every output kind and for the lock, request caches damaged in place, and YAML
crafted to hang or mislead a loader. Each must end in exit code 2 with one `error:` line and no traceback (or,
where sws can carry on safely, in success), and nothing outside the run directory may change.
"""

import json
import os
import random
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from _openai_server import MODEL, FakeServer, serving
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from sws import side_by_side
from sws.cli import app
from sws.errors import UserError
from sws.records import DATA_DIR
from sws.run_dir import PILOT_MARKER, RunDir
from sws.stages.estimate import prepare_pilot
from sws.training import verl
from sws.worlds.arith import bootstrap
from sws.worlds.arith.settings import ArithSettings

FUZZ = settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
SEED_FILE = DATA_DIR / "math500.json"


def tree(root: Path) -> dict[str, tuple[bytes, int] | str]:
    """Every file (its bytes and modification time: rewritten with the same bytes is still written) and link
    (its target) under `root`; a run's lock file is written by every command that takes it."""
    return {str(p.relative_to(root)): (f"-> {os.readlink(p)}" if p.is_symlink()
                                       else (p.read_bytes(), p.stat().st_mtime_ns))
            for p in sorted(root.rglob("*")) if (p.is_symlink() or p.is_file()) and p.name != ".sws.lock"}


def invoke(args: list[str]):
    return CliRunner().invoke(app, args)


def assert_one_line(result, phrase: str = "") -> None:
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and phrase in lines[0], result.stderr
    assert "Traceback" not in result.output


@pytest.fixture(scope="module", autouse=True)
def api_key() -> Iterator[None]:
    previous = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = "EMPTY"
    yield
    if previous is None:
        del os.environ["OPENAI_API_KEY"]
    else:
        os.environ["OPENAI_API_KEY"] = previous


@pytest.fixture(scope="module")
def server() -> Iterator[FakeServer]:
    with serving() as fake:
        yield fake


@pytest.fixture(scope="module")
def outside(tmp_path_factory) -> Path:
    """A folder beside every run, with a file someone cares about: nothing may change it."""
    folder = tmp_path_factory.mktemp("outside")
    (folder / "precious.txt").write_text("precious\n")
    return folder


def pipeline_for(folder: Path, server: FakeServer) -> Path:
    path = folder / "pipeline.yaml"
    role = {"engine": "openai", "model": MODEL, "options": {"base_url": server.base_url, "max_retries": 1,
                                                            "retry_backoff": 0.01}}
    path.write_text(yaml.safe_dump({"roles": {"generator": role}}))
    return path


def sample(run: Path, pipeline: Path, n: int = 1):
    return invoke(["sample", "--run", str(run), "--role", "generator", "--prompt", "Compute 2+2.",
                   "-n", str(n), "--config", str(pipeline)])


# ---------------------------------------------------------------- a server that does not answer as OpenAI does

VALID = {"id": "x", "object": "chat.completion", "created": 0, "model": MODEL,
         "choices": [{"index": 0, "message": {"role": "assistant", "content": "4"}, "finish_reason": "stop"}],
         "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}
junk = st.one_of(st.integers(-10**30, -1), st.floats(allow_nan=True), st.booleans(),
                 st.lists(st.integers(), max_size=3), st.dictionaries(st.text(max_size=5), st.integers(), max_size=2))


@st.composite
def hostile_replies(draw) -> tuple[str, bytes]:
    kind = draw(st.sampled_from(["cut", "bytes", "html", "json value", "choices", "choice", "content", "index",
                                 "finish_reason", "too many"]))
    body = json.loads(json.dumps(VALID))
    if kind == "cut":  # every proper prefix of a JSON object is no JSON
        text = json.dumps(VALID, separators=(",", ":"))
        return "application/json", text[: draw(st.integers(0, len(text) - 1))].encode()
    if kind == "bytes":
        return "application/json", draw(st.binary(max_size=300)).replace(b"{", b"")
    if kind == "html":
        return "text/html", f"<!DOCTYPE html><html><body>{draw(st.text(max_size=50))}</body></html>".encode()
    if kind == "json value":
        body = draw(st.one_of(junk, st.text(max_size=20), st.none()))
    elif kind == "choices":
        body["choices"] = draw(st.one_of(junk.filter(lambda v: not (isinstance(v, list) and v and
                                                                 all(isinstance(c, dict) for c in v))), st.just([])))
    elif kind == "choice":
        body["choices"] = [draw(st.one_of(st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=2)))]
    elif kind == "content":
        body["choices"][0]["message"]["content"] = draw(junk)
    elif kind == "index":
        body["choices"][0]["index"] = draw(junk.filter(lambda v: not (isinstance(v, int) and v >= 0)))
    elif kind == "finish_reason":
        body["choices"][0]["finish_reason"] = draw(junk)
    else:
        body["choices"] = body["choices"] * draw(st.integers(2, 5))
    return "application/json", json.dumps(body).encode()


@FUZZ
@given(reply=hostile_replies())
def test_a_reply_that_is_no_completion_is_one_line_naming_the_server(server, outside, tmp_path_factory, reply):
    folder = tmp_path_factory.mktemp("hostile")
    before = tree(outside)
    server.raw_post = reply
    try:
        result = sample(folder / "run", pipeline_for(folder, server))
    finally:
        server.raw_post = None
    assert_one_line(result, server.base_url)
    assert tree(outside) == before


@FUZZ
@given(usage=st.one_of(junk, st.none(), st.text(max_size=5)),
       text=st.text(st.characters(codec="utf-16", exclude_categories=["Cc"]), max_size=20)
       .map(lambda t: t + "\ud800"))
def test_odd_usage_and_lone_surrogates_are_taken_in_stride(server, tmp_path_factory, usage, text):
    folder = tmp_path_factory.mktemp("odd")
    server.mangle = lambda body: {**body, "usage": {"completion_tokens": usage},
                                  "choices": [{**c, "message": {"content": text}} for c in body["choices"]]}
    try:
        result = sample(folder / "run", pipeline_for(folder, server))
    finally:
        server.mangle = None
    assert result.exit_code == 0, result.output
    assert "\ufffd" in result.stdout


def test_an_html_page_as_the_server_is_one_line_at_the_start(server, outside, tmp_path):
    server.raw_get = ("text/html", b"<html><body>an ordinary web site</body></html>")
    try:
        result = sample(tmp_path / "run", pipeline_for(tmp_path, server))
    finally:
        server.raw_get = None
    assert_one_line(result, "an HTML page instead of its model list")


def test_an_error_that_repeats_the_api_key_is_printed_without_it(server, tmp_path, monkeypatch):
    key = "sk-test-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    server.failures, server.echo_authorization = [400], True
    try:
        result = sample(tmp_path / "run", pipeline_for(tmp_path, server))
    finally:
        server.failures, server.echo_authorization = [], False
    assert_one_line(result, "[redacted]")
    assert key not in result.output
    assert not [path for path in (tmp_path / "run").rglob("*") if path.is_file() and key.encode() in path.read_bytes()]


# ---------------------------------------------------------------- a damaged request cache

@FUZZ
@given(data=st.data())
def test_a_damaged_cache_is_one_line_saying_to_move_it_away(server, outside, tmp_path_factory, data):
    folder = tmp_path_factory.mktemp("cache")
    pipeline, run = pipeline_for(folder, server), folder / "run"
    assert sample(run, pipeline).exit_code == 0
    cache = RunDir(run).request_cache
    kind = data.draw(st.sampled_from(["header", "text", "folder", "link", "schema"]))
    if kind == "header":  # sqlite reads its header first, so a damaged one is always noticed
        garbage = data.draw(st.binary(min_size=1, max_size=100).filter(lambda b: b != b"SQLite format 3\0"[:len(b)]))
        cache.write_bytes(garbage + cache.read_bytes()[len(garbage):])
    elif kind == "text":
        cache.write_text(data.draw(st.text(min_size=1, max_size=200)) + "\n")
    elif kind == "folder":
        cache.unlink()
        cache.mkdir()
    elif kind == "link":
        cache.unlink()
        cache.symlink_to(outside / "precious.txt")
    else:
        import sqlite3

        cache.unlink()
        with sqlite3.connect(cache) as other:
            other.execute(f"CREATE TABLE completions ({data.draw(st.sampled_from(['id INTEGER', 'key BLOB']))})")
    before = tree(outside)
    assert_one_line(sample(run, pipeline), "damaged request cache")
    assert tree(outside) == before


# ---------------------------------------------------------------- links planted in a shared run directory

@pytest.fixture(scope="module")
def prepared(tmp_path_factory) -> Path:
    run = tmp_path_factory.mktemp("prepared") / "run"
    assert invoke(["prepare", "--input", str(SEED_FILE), "--run", str(run)]).exit_code == 0
    return run


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck))
@given(planted=st.sets(st.sampled_from(["problems.parquet", "problems.rejected.parquet", "manifests/prepare.json",
                                        "config.yaml"]), min_size=1))
def test_links_planted_for_outputs_are_replaced_and_their_targets_kept(prepared, tmp_path_factory, planted):
    outside = tmp_path_factory.mktemp("targets")
    for name in planted:  # each link leads to a copy of the file it replaces: sws reads through it, never writes
        target = outside / name.replace("/", "_")
        target.write_bytes((prepared / name).read_bytes())
        (prepared / name).unlink()
        (prepared / name).symlink_to(target)
    before = tree(outside)
    result = invoke(["prepare", "--input", str(SEED_FILE), "--run", str(prepared), "--force"])
    assert result.exit_code == 0, result.output
    assert tree(outside) == before
    assert not any((prepared / name).is_symlink() for name in planted)


@pytest.mark.parametrize("planted", ["manifests", "cache", ".sws.lock"])
def test_a_link_out_of_the_run_for_a_folder_or_the_lock_is_one_line(tmp_path, planted):
    run, outside = tmp_path / "run", tmp_path / "outside"
    assert invoke(["prepare", "--input", str(SEED_FILE), "--run", str(run)]).exit_code == 0
    outside.mkdir()
    (outside / "precious.txt").write_text("precious\n")
    if planted != ".sws.lock":
        if (run / planted).is_dir():
            for child in (run / planted).iterdir():
                child.rename(outside / child.name)
            (run / planted).rmdir()
        (run / planted).symlink_to(outside)
    else:
        (run / planted).unlink()
        (run / planted).symlink_to(outside / "precious.txt")
    before = tree(outside)
    assert_one_line(invoke(["prepare", "--input", str(SEED_FILE), "--run", str(run), "--force"]), "symbolic link")
    assert tree(outside) == before


# ---------------------------------------------------------------- YAML crafted to hang or mislead

@st.composite
def hostile_yaml(draw) -> str:
    kind = draw(st.sampled_from(["bomb", "self alias", "deep", "repeated key"]))
    if kind == "bomb":
        width, depth = draw(st.integers(8, 12)), draw(st.integers(6, 9))
        lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
        lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, depth)]
        return "\n".join(lines) + "\n"
    if kind == "self alias":
        return draw(st.sampled_from(["a: &a [1, *a]\n", "a: &a {b: *a}\n", "seed: 1\nx: &x [[*x]]\n"]))
    if kind == "deep":
        depth = draw(st.integers(65, 3000))
        return "options: " + "[" * depth + "]" * depth + "\n"
    section = draw(st.sampled_from(["seed: 1", "world: arith", "identify: {max_acc: 0.5}"]))
    return f"{section}\nreport: {{max_trajectories: 3}}\n{section}\n"


@FUZZ
@given(text=hostile_yaml())
def test_hostile_yaml_is_one_line_and_changes_nothing(prepared, tmp_path_factory, text):
    path = tmp_path_factory.mktemp("yaml") / "pipeline.yaml"
    path.write_text(text)
    before = tree(prepared)
    assert_one_line(invoke(["identify", "--run", str(prepared), "--config", str(path)]), "not valid YAML")
    assert tree(prepared) == before


def test_an_emptied_run_config_is_one_line_not_the_defaults(prepared):
    config = RunDir(prepared).config
    saved = config.read_bytes()
    config.write_text(random.choice(["", "\n", "   \n"]))
    try:
        assert_one_line(invoke(["identify", "--run", str(prepared)]), "config.yaml: empty")
    finally:
        config.write_bytes(saved)


# ---------------------------------------------------------------- links planted at logs, markers, locks, copies

def planted_link(path: Path, outside: Path) -> Path:
    """A link at `path` to a file of `outside` someone cares about."""
    path.parent.mkdir(parents=True, exist_ok=True)
    target = outside / f"{path.name.lstrip('.')}.precious"
    target.write_text("precious\n")
    path.symlink_to(target)
    return target


def test_links_planted_for_the_estimate_pilots_marker_and_copies_are_replaced(prepared, tmp_path):
    run, outside = tmp_path / "run", tmp_path / "outside"
    outside.mkdir()
    shutil.copytree(prepared, run)
    pilot = RunDir(run).estimate
    planted = [pilot.root / PILOT_MARKER, pilot.table("problems")]
    for path in planted:
        planted_link(path, outside)
    before = tree(outside)
    prepare_pilot(run)
    assert tree(outside) == before
    assert not any(path.is_symlink() for path in planted)
    assert pilot.table("problems").read_bytes() == RunDir(run).table("problems").read_bytes()


def test_a_link_planted_at_a_side_by_side_log_is_refused(tmp_path):
    log, outside = tmp_path / "train" / "augmented.log", tmp_path / "outside"
    outside.mkdir()
    planted_link(log, outside)
    before = tree(outside)
    with pytest.raises(UserError, match="symbolic link"):
        side_by_side._call_logged(log, print, ("written through the link",))
    assert tree(outside) == before


def test_a_link_planted_at_verls_log_is_refused(tmp_path):
    log, outside = tmp_path / "train" / "verl.log", tmp_path / "outside"
    outside.mkdir()
    planted_link(log, outside)
    before = tree(outside)
    with pytest.raises(UserError, match="symbolic link"):
        verl._merge(Path(sys.executable), tmp_path / "actor", tmp_path / "train" / "final", log)
    assert tree(outside) == before


def test_a_link_planted_at_the_policy_caches_lock_is_refused_untouched(tmp_path, monkeypatch):
    monkeypatch.setenv("SWS_CACHE", str(tmp_path / "cache"))
    outside = tmp_path / "outside"
    outside.mkdir()
    settings = bootstrap.bootstrap_settings(ArithSettings().bootstrap_steps, 0, ArithSettings().misconception_rate)
    folder = bootstrap.cached_folder(settings)
    planted_link(folder.parent / f".{folder.name}.lock", outside)
    before = tree(outside)
    with pytest.raises(UserError, match="symbolic link"):
        bootstrap.bootstrap_policy()
    assert tree(outside) == before
