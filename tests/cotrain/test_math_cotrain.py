"""`sws run` of a co-training pipeline in the math world: both policies on a Tinker-API server (the fake one of
tests/_tinker_server.py, through the real client), the cards labeled by a labeler engine's consistent samples,
the validation tasks drawn from MATH-500; and one error line for the local backend, which has no math
synthesizer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("tinker")

from _http_serving import running  # noqa: E402
from _math_cotrain import SEEDS, fake_tinker, write_pipeline  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

import sws.engines  # noqa: E402
from sws.cli import app  # noqa: E402
from sws.engines import CachedEngine, Completion, Engine, Request, cache_identity  # noqa: E402
from sws.near_duplicates import problem_key  # noqa: E402
from sws.tables import read_parquet  # noqa: E402


class Labeler(Engine):
    """The labeler: three of four samples say 7."""

    name = "labeler"
    model = "labeler"
    honours_n = True

    def __init__(self) -> None:
        self.asked: list[str] = []

    def generate(self, requests: list[Request]) -> list[list[Completion]]:
        self.asked += [request.fields["problem"] for request in requests]
        return [[Completion(f"So $\\boxed{{{answer}}}$.") for answer in ("7", "7", "7", "8")][:request.n]
                for request in requests]

    def close(self) -> None:
        pass


@pytest.fixture(autouse=True)
def labeler_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")  # the labeler's server needs none; preflight asks it is set


@pytest.fixture
def server(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TINKER_TELEMETRY", "0")
    monkeypatch.setenv("TINKER_API_KEY", "tml-math-cotrain-test-key")
    with running(fake_tinker(tmp_path_factory.mktemp("tinker-tokenizer"))) as fake:
        yield fake


@pytest.fixture
def labeler(monkeypatch) -> Labeler:
    engine, real = Labeler(), sws.engines.make_engine
    monkeypatch.setattr(sws.engines, "make_engine", lambda cfg, cache=None: (
        CachedEngine(engine, cache, cache_identity(cfg)) if cfg.model == "labeler" else real(cfg, cache)))
    return engine


def test_math_cotrains_on_tinker_with_the_labelers_consistent_answer_as_the_label(server, labeler, tmp_path):
    run = tmp_path / "run"
    config = write_pipeline(tmp_path, server.base_url)
    result = CliRunner().invoke(app, ["run", str(config), "--run", str(run)])
    assert result.exit_code == 0, result.output
    pool = read_parquet(run / "cotrain" / "cotrained" / "pool.parquet").sort("task_id")
    # step 0: the card and its copy; step 1: the same card, now a recent task
    assert pool["reject_reason"].to_list() == [None, "duplicate", "duplicate", "duplicate"]
    valid = pool.row(0, named=True)
    assert (valid["answer"], valid["reliability"], valid["synth_answer"], valid["category"]) == (
        "7", 0.75, "7", "Algebra")
    assert (valid["k"], valid["n_correct"]) == (2, 2)  # the server's rollouts end in \boxed{7}
    assert labeler.asked == ["What is 3 + 4 if you add them up?"]  # only the card past the checks
    validation = read_parquet(run / "cotrain" / "cotrained" / "validation.parquet")
    assert sorted(validation["category"]) == ["Algebra", "Algebra", "Prealgebra", "Prealgebra"]
    assert not {problem_key(p) for p in validation["problem"]} & {problem_key(p) for p, _, _ in SEEDS}
    initial = read_parquet(run / "cotrain" / "initial" / "validation.parquet")
    assert initial["problem"].to_list() == validation["problem"].to_list()  # the initial reasoner, the same tasks
    # the initial reasoner's session, then both policies' sessions are finished (their heartbeats stop)
    assert [body["reason"]["type"] for body in server.bodies("sessions/session-0/finish")] == ["success"] * 3


def test_math_on_the_local_backend_is_one_error_line(tmp_path):
    config = write_pipeline(tmp_path, "http://127.0.0.1:9", backend="local")
    result = CliRunner().invoke(app, ["run", str(config), "--run", str(tmp_path / "run")])
    assert result.exit_code == 2
    [line] = [line for line in result.output.splitlines() if line.startswith("error:")]
    assert "cotrain.backend" in line and "set cotrain.backend: tinker" in line


def test_a_labeler_that_cannot_start_stops_the_run_before_its_first_stage(tmp_path):
    config = json.loads(write_pipeline(tmp_path, "http://127.0.0.1:9").read_text())
    config["roles"]["labeler"] = {"engine": "hf", "model": str(tmp_path / "no-such-model")}
    (tmp_path / "pipeline.yaml").write_text(json.dumps(config))
    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", str(tmp_path / "pipeline.yaml"), "--run", str(run)])
    assert result.exit_code == 2
    assert "no-such-model" in result.output and len(result.output.strip().splitlines()) == 1
    assert not (run / "problems.parquet").exists()  # found before prepare, not after it



def test_without_a_labeler_a_run_is_one_error_line_naming_the_role_before_its_first_stage(tmp_path):
    run = tmp_path / "run"
    result = CliRunner().invoke(app, ["run", str(_without_labeler(tmp_path)), "--run", str(run)])
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert "'roles.labeler' is not set" in line
    assert not (run / "problems.parquet").exists()


def test_without_a_labeler_an_arms_command_is_one_error_line_naming_the_role(tmp_path):
    config, run = _without_labeler(tmp_path), tmp_path / "run"
    assert CliRunner().invoke(app, ["prepare", "--config", str(config), "--run", str(run)]).exit_code == 0
    result = CliRunner().invoke(app, ["cotrain-cotrained", "--config", str(config), "--run", str(run)])
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert "'roles.labeler' is not set" in line
    assert not (run / "cotrain").exists()


def _without_labeler(tmp_path: Path) -> Path:
    config = json.loads(write_pipeline(tmp_path, "http://127.0.0.1:9").read_text())
    del config["roles"]
    path = tmp_path / "no-labeler.yaml"
    path.write_text(json.dumps(config))
    return path
