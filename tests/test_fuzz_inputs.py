"""Fuzzing what users hand to `sws`: seed files, rollout logs, ingest inputs and pipeline files.

Every generated input is broken by construction (a mutation of a valid file, or the right shape with wrong
content). Each must end in exit code 2 with one `error:` line and no traceback, and must leave every artifact
that was already in the run as it was.
"""

import json
import random
from pathlib import Path

import polars as pl
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from typer.testing import CliRunner

from sws import config
from sws.cli import app
from sws.presets import PRESET_DIR
from sws.tables import table_path, write_table

FIXTURES = Path(__file__).parent / "fixtures"
EXAMPLES = 60
# Four fuzzers of EXAMPLES inputs each: 240 broken inputs per run.
FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))

junk_text = st.text(st.characters(blacklist_categories=["Cs"]), max_size=200)
junk_value = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**12), st.floats(allow_nan=True),
                       junk_text, st.lists(st.integers(), max_size=3), st.dictionaries(junk_text, st.integers(),
                                                                                          max_size=2))


def mutated(valid: bytes) -> st.SearchStrategy[bytes]:
    """`valid` cut short, with bytes overwritten, or with junk spliced in."""
    def mutate(seed: int) -> bytes:
        rng = random.Random(seed)
        data = bytearray(valid)
        kind = rng.randrange(3)
        if kind == 0:
            return bytes(data[: rng.randrange(1, max(2, len(data) - 1))])
        if kind == 1:
            for _ in range(rng.randrange(1, 8)):
                data[rng.randrange(len(data))] = rng.choice(b'{}[]":,\x00\xff')
            return bytes(data)
        cut = rng.randrange(len(data))
        return bytes(data[:cut]) + rng.choice([b"\xff\xfe", b'{"a": [', b"]]]", b"\n{not json\n"]) + bytes(data[cut:])

    return st.integers(0, 2**32).map(mutate)


def snapshot(run_dir: Path, skip: set[str] = frozenset()) -> dict[str, bytes]:
    return {str(p.relative_to(run_dir)): p.read_bytes() for p in sorted(run_dir.rglob("*"))
            if p.is_file() and p.name not in skip and p.name != ".sws.lock"}


def assert_refused(run_dir: Path, args: list[str], before: dict[str, bytes], skip: set[str] = frozenset()) -> None:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, (result.exit_code, result.output, result.exception)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert snapshot(run_dir, skip) == before


@pytest.fixture(scope="module")
def identified_run(tmp_path_factory) -> Path:
    """A run with problems, a rollout log and the identify outputs, whose files must survive every bad input."""
    run_dir = tmp_path_factory.mktemp("fuzz") / "run"
    write_table(run_dir, "problems", pl.read_ndjson(FIXTURES / "math_problems.jsonl"))
    result = CliRunner().invoke(app, ["ingest", "--run", str(run_dir), "--verl-dumps",
                                      str(FIXTURES / "verl_dumps" / "with_problem_id")])
    assert result.exit_code == 0, result.output
    assert CliRunner().invoke(app, ["identify", "--run", str(run_dir)]).exit_code == 0
    return run_dir


SEED_FILE = (FIXTURES / "math_problems.jsonl").read_bytes()


@FUZZ
@given(content=mutated(SEED_FILE), suffix=st.sampled_from([".jsonl", ".json", ".parquet"]))
def test_a_broken_seed_file(identified_run, tmp_path_factory, content, suffix):
    path = tmp_path_factory.mktemp("seed") / f"seed{suffix}"
    path.write_bytes(content)
    if suffix == ".jsonl":  # a JSONL file some of whose lines still parse is readable: break one for sure
        path.write_bytes(content + b"\n{broken")
    assert_refused(identified_run, ["prepare", "--input", str(path), "--run", str(identified_run)],
                   snapshot(identified_run))


@FUZZ
@given(data=st.data())
def test_a_broken_rollout_log(identified_run, data):
    rollouts = table_path(identified_run, "rollouts")
    original = rollouts.read_bytes()
    before = snapshot(identified_run, {"rollouts.parquet"})
    kind = data.draw(st.sampled_from(["bytes", "column", "count", "null", "unknown"]))
    table = pl.read_parquet(rollouts)
    if kind == "bytes":  # cut short: a Parquet file's footer is at its end (a flipped byte may go unnoticed)
        rollouts.write_bytes(original[: data.draw(st.integers(0, len(original) - 1))])
    else:
        if kind == "column":
            table = table.drop(data.draw(st.sampled_from(table.columns)))
        elif kind == "count":
            column = data.draw(st.sampled_from(["n", "n_correct"]))
            table = table.with_columns(pl.lit(data.draw(st.integers(-10**6, -1)), dtype=pl.Int64).alias(column))
        elif kind == "null":
            column = data.draw(st.sampled_from(table.columns))
            table = table.with_columns(pl.lit(None, dtype=table.schema[column]).alias(column))
        else:
            table = table.with_columns(pl.lit(data.draw(junk_text)).alias("problem_id") + "#unknown")
        table.write_parquet(rollouts)
    try:
        assert_refused(identified_run, ["identify", "--run", str(identified_run), "--force"], before,
                       {"rollouts.parquet"})
    finally:
        rollouts.write_bytes(original)


DUMP = (FIXTURES / "verl_dumps" / "with_problem_id" / "1.jsonl").read_bytes()
ACC_RECORDS = (FIXTURES / "acc_records.json").read_bytes()


@FUZZ
@given(data=st.data())
def test_broken_ingest_inputs(identified_run, tmp_path_factory, data):
    before = snapshot(identified_run)
    folder = tmp_path_factory.mktemp("ingest")
    if data.draw(st.booleans()):
        dumps = folder / "dumps"
        dumps.mkdir()
        lines = [json.loads(line) for line in DUMP.decode().splitlines()]
        kind = data.draw(st.sampled_from(["bytes", "field", "value"]))
        if kind == "bytes":
            (dumps / "1.jsonl").write_bytes(data.draw(mutated(DUMP)) + b"\n{broken")
        else:
            field = data.draw(st.sampled_from(["step", "score", "problem_id"]))
            for line in lines:
                if kind == "field":
                    line.pop(field, None)
                    line.pop("acc", None)
                    line.pop("input", None)
                else:
                    # An empty problem_id means none was given (the line is matched by index or text), not junk.
                    line[field] = data.draw(st.one_of(junk_text.filter(lambda t: t and not t.strip().isdigit()),
                                                      st.lists(st.integers(), min_size=1, max_size=2)))
                    line.pop("acc", None)
            (dumps / "x.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
        args = ["--verl-dumps", str(dumps)]
    else:
        path = folder / "acc_records.json"
        records = json.loads(ACC_RECORDS)
        kind = data.draw(st.sampled_from(["bytes", "shape", "value"]))
        if kind == "bytes":
            path.write_bytes(data.draw(mutated(ACC_RECORDS)) + b"}")
        elif kind == "shape":
            path.write_text(json.dumps(data.draw(st.one_of(st.lists(junk_value, max_size=3),
                                                           st.dictionaries(junk_text, junk_value, max_size=3)))))
        else:
            key = data.draw(st.sampled_from(sorted(records["train"])))
            records["train"][key] = data.draw(st.one_of(
                st.lists(st.floats(1.01, 1e9) | st.floats(-1e9, -0.01), min_size=1, max_size=3), junk_text))
            path.write_text(json.dumps(records))
        args = ["--acc-records", str(path)]
    assert_refused(identified_run, ["ingest", "--run", str(identified_run), "--force", *args], before)


PIPELINE = yaml.safe_load((PRESET_DIR / "quick.yaml").read_text())
NOT_A_NUMBER = [float("nan"), float("inf"), float("-inf")]
OUT_OF_RANGE = {
    ("identify", "max_acc"): [*NOT_A_NUMBER, -7.0, 7.0], ("identify", "max_slope"): [*NOT_A_NUMBER, -7.0, 7.0],
    ("synthesize", "min_consistency"): [*NOT_A_NUMBER, -0.5, 1.5], ("filter", "band"): [*NOT_A_NUMBER, -1.0, 2.0],
    ("synthesize", "budget"): [-7, -1], ("train", "learning_rate"): [*NOT_A_NUMBER, 0.0, -1e-4],
}
# Every setting name anywhere in the pipeline schema: a drawn "unknown" key must be none of them.
KNOWN_KEYS = {name for model in vars(config).values() if isinstance(model, type) and issubclass(model, BaseModel)
              for name in model.model_fields}
SECTIONS_AND_FIELDS = [(section, field) for section, fields in PIPELINE.items() if isinstance(fields, dict)
                       for field in fields]


@FUZZ
@given(data=st.data())
def test_a_broken_pipeline_file(identified_run, tmp_path_factory, data):
    before = snapshot(identified_run)
    path = tmp_path_factory.mktemp("pipeline") / "pipeline.yaml"
    kind = data.draw(st.sampled_from(["text", "unknown key", "wrong type", "out of range"]))
    pipeline = json.loads(json.dumps(PIPELINE))
    if kind == "text":
        path.write_bytes(data.draw(mutated(yaml.safe_dump(PIPELINE).encode())) + b"\n: [unclosed\n")
    else:
        if kind == "unknown key":
            section = data.draw(st.sampled_from(sorted(pipeline)))
            key = data.draw(st.from_regex(r"[a-z_]{1,12}", fullmatch=True).filter(lambda k: k not in KNOWN_KEYS))
            if isinstance(pipeline[section], dict):
                pipeline[section][key] = 1
            else:
                pipeline[key] = 1
        elif kind == "wrong type":
            section, field = data.draw(st.sampled_from(SECTIONS_AND_FIELDS))
            pipeline[section][field] = {"not": ["a", "setting"]}
        else:
            section, field = data.draw(st.sampled_from(sorted(OUT_OF_RANGE)))
            bad = data.draw(st.sampled_from(OUT_OF_RANGE[section, field]))
            pipeline.setdefault(section, {})[field] = [bad, bad] if field == "band" else bad
        path.write_text(yaml.safe_dump(pipeline))
    assert_refused(identified_run, ["identify", "--run", str(identified_run), "--config", str(path)], before)
