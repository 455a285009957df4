from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from sws import runner
from sws.cli import app
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.stages import ingest
from sws.tables import read_table, table_path, write_table

FIXTURES = Path(__file__).parents[1] / "fixtures"


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    write_table(tmp_path, "problems", pl.read_ndjson(FIXTURES / "math_problems.jsonl"))
    return tmp_path


def invoke(*args: str):
    return CliRunner().invoke(app, ["ingest", *args])


def test_verl_dumps_then_identify(run_dir: Path) -> None:
    result = invoke("--run", str(run_dir), "--verl-dumps", str(FIXTURES / "verl_dumps" / "prompt_only"))
    assert result.exit_code == 0, result.output
    rollouts = read_table(run_dir, "rollouts")
    assert rollouts.height == 9 and rollouts["n"].sum() == 36 and rollouts["n_correct"].sum() == 17

    identified = CliRunner().invoke(app, ["identify", "--run", str(run_dir)])
    assert identified.exit_code == 0, identified.output
    weak = read_table(run_dir, "weakness").filter(pl.col("weak"))["problem_id"].to_list()
    # 0002: 1/4 then 2/4 rises; 1740 always right; 2513: 0/4 then 1/4 rises; 3376: 0/4 once; 5537: 2/4 once
    assert weak == ["math-train-3376", "math-train-5537"]


def test_acc_records_with_the_seed_file(run_dir: Path) -> None:
    result = invoke("--run", str(run_dir), "--acc-records", str(FIXTURES / "acc_records.json"),
                    "--seed-file", str(FIXTURES / "seed_train.jsonl"))
    assert result.exit_code == 0, result.output
    rollouts = read_table(run_dir, "rollouts")
    assert rollouts.height == 15 and rollouts["problem_id"].n_unique() == 6


def test_unmatched_log_exits_2_and_keeps_the_previous_rollouts(run_dir: Path) -> None:
    previous = pl.DataFrame({"step": [1], "problem_id": ["math-train-0002"], "n": [8], "n_correct": [3]})
    write_table(run_dir, "rollouts", previous)
    result = invoke("--run", str(run_dir), "--acc-records", str(FIXTURES / "acc_records.json"))
    assert result.exit_code == 2
    assert "records match no problem" in result.output and "Traceback" not in result.output
    assert read_table(run_dir, "rollouts").equals(previous)


@pytest.mark.parametrize("make", [
    lambda dumps: (dumps / "1.jsonl").write_text(""),
    lambda dumps: (dumps / "1.jsonl").mkdir(),
    lambda dumps: (dumps / "1.jsonl").write_text('{"input": "x", "score": 0, "step": 1, "graded": false, '
                                                 '"problem_id": "math-train-0002"}\n'),
])
def test_an_empty_log_never_replaces_a_good_one(run_dir: Path, make) -> None:
    assert invoke("--run", str(run_dir), "--verl-dumps", str(FIXTURES / "verl_dumps" / "prompt_only")).exit_code == 0
    good = table_path(run_dir, "rollouts").read_bytes()
    dumps = run_dir / "dumps"
    dumps.mkdir()
    make(dumps)
    result = invoke("--run", str(run_dir), "--verl-dumps", str(dumps))
    assert result.exit_code == 2 and result.output.startswith("error: ") and result.output.count("\n") == 1
    assert table_path(run_dir, "rollouts").read_bytes() == good


@pytest.mark.parametrize("line, message", [
    ('{"input": "x", "gts": "4", "score": 1.0, "problem_id": "math-train-0002"}', "lack a numeric 'step'"),
    ('{"input": "user\\nCompute 1+1.\\nassistant\\n", "gts": "2", "score": 1.0, "step": 1}',
     "1 of 1 response lines match no problem"),
    ('{"input": "x", "score": 1.0, "step": 1', "not valid JSONL"),
])
def test_a_bad_verl_dump_is_one_error_line_and_writes_nothing(run_dir: Path, line: str, message: str) -> None:
    dumps = run_dir / "dumps"
    dumps.mkdir()
    (dumps / "1.jsonl").write_text(line + "\n")
    result = invoke("--run", str(run_dir), "--verl-dumps", str(dumps))
    assert result.exit_code == 2
    assert result.output.startswith("error: ") and message in result.output and result.output.count("\n") == 1
    assert not table_path(run_dir, "rollouts").exists()


@pytest.mark.parametrize("args", [[], ["--verl-dumps", "a", "--acc-records", "b"]])
def test_exactly_one_log_is_required(run_dir: Path, args: list[str]) -> None:
    result = invoke("--run", str(run_dir), *args)
    assert result.exit_code == 2 and "exactly one of --verl-dumps DIR or --acc-records FILE" in result.output
    assert not table_path(run_dir, "rollouts").exists()


def test_missing_log_or_problems_exit_2(run_dir: Path, tmp_path: Path) -> None:
    missing_log = invoke("--run", str(run_dir), "--acc-records", str(tmp_path / "nope.json"))
    assert missing_log.exit_code == 2 and "nope.json: file not found" in missing_log.output
    no_problems = invoke("--run", str(tmp_path / "fresh"), "--verl-dumps", str(FIXTURES / "verl_dumps" / "prompt_only"))
    assert no_problems.exit_code == 2 and "sws prepare" in no_problems.output


def test_unchanged_ingest_is_skipped(run_dir: Path) -> None:
    cfg = PipelineConfig.model_validate(
        {"ingest": {"format": "verl", "path": str(FIXTURES / "verl_dumps" / "with_problem_id")}})
    assert not runner.run(ingest.STAGE, cfg, run_dir).skipped
    assert runner.run(ingest.STAGE, cfg, run_dir).skipped
    with pytest.raises(UserError, match="no rollout log given"):
        runner.run(ingest.STAGE, PipelineConfig(), run_dir)
