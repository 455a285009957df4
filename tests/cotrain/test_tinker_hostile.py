"""`sws run` of a co-training pipeline whose learners point at a hostile Tinker-API server (the fake one of
tests/_tinker_server.py, through the real client; the labeler is the fake OpenAI-compatible server): each
malformed reply, failure and hang after a good first step, each tokenizer that cannot be loaded and each wrong
setting ends in one `error:` line saying what to do, exit 2, with the first step's checkpoint kept; Ctrl-C
during a hung call ends the run within 5 s, and the rerun resumes from the last step."""

from __future__ import annotations

import json
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

pytest.importorskip("tinker")

from _http_serving import running  # noqa: E402
from _interrupt import PROMPT_END_S, interrupt_when  # noqa: E402
from _math_cotrain import fake_tinker, tinker_policy, write_pipeline  # noqa: E402
from _openai_server import MODEL, FakeServer  # noqa: E402
from _tinker_server import FakeTinker  # noqa: E402
from typer.testing import CliRunner  # noqa: E402

from sws.cli import app  # noqa: E402

KEY = "tml-hostile-test-key-0123456789"
DEADLINE_S = 2.0  # cotrain.call_deadline_s in these runs
VOCABULARY = 258  # the arith tokenizer's


@pytest.fixture
def tinker(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TINKER_TELEMETRY", "0")
    monkeypatch.setenv("TINKER_API_KEY", KEY)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")  # the labeler's server needs none; preflight asks it is set
    with running(fake_tinker(tmp_path_factory.mktemp("tinker-tokenizer"))) as fake:
        yield fake
        fake.on_request, fake.fail_status = None, None
        fake.stall.clear()


@pytest.fixture
def labeler():
    with running(FakeServer()) as server:
        server.writer = lambda prompt, body: "So $\\boxed{7}$."  # consistent: the card's label is 7
        yield server


def pipeline(tmp_path: Path, tinker: FakeTinker, labeler: FakeServer, **cotrain) -> Path:
    role = {"engine": "openai", "model": MODEL, "options": {"base_url": labeler.base_url}}
    cotrain = {"call_deadline_s": DEADLINE_S, **cotrain}
    return write_pipeline(tmp_path, tinker.base_url, labeler=role, **cotrain)


def after_the_first_step(server: FakeTinker, turn: Callable[[FakeTinker], None], at: str = "asample"
                         ) -> dict[str, float]:
    """Turn the server hostile at the first request to `at` after step 1's checkpoint (both policies' states
    saved); returns where the instant it turned is written."""
    turned: dict[str, float] = {}

    def on_request(path: str) -> None:
        if path == f"/api/v1/{at}" and len(server.bodies("save_weights")) == 2 and not turned:
            turn(server)
            turned["at"] = time.monotonic()

    server.on_request = on_request
    return turned


def the_error_line(stderr: str) -> str:
    """The one `error:` line, with no second prefix and no traceback."""
    [line] = [line for line in stderr.splitlines() if line.startswith("error: ")]
    assert "error: error:" not in stderr and "Traceback" not in stderr, stderr
    return line


def step_checkpointed(run: Path) -> int:
    state = run / "cotrain" / "cotrained" / "checkpoints" / "live" / "state.json"
    return json.loads(state.read_text())["step"]


def _stall(server: FakeTinker) -> None:
    server.stall.set()


def _set(**attributes) -> Callable[[FakeTinker], None]:
    def turn(server: FakeTinker) -> None:
        for name, value in attributes.items():
            setattr(server, name, value)
    return turn


# Step 2's one card repeats step 1's, so only the synthesizer samples; both policies update (the reasoner on its
# topped-up tasks), at once, so either may be the one that reads a hostile reply to an update or a save.
EITHER = "(synthesizer|reasoner)"
HOSTILE = {
    "token ids outside the vocabulary": (
        _set(sample_tokens=[VOCABULARY + 5]),
        "sample for synthesizer: a sample holds token id 263, outside the tokenizer's vocabulary of 258"),
    "negative token ids": (_set(sample_tokens=[5, -3]), "a sample holds token id -3"),
    "no samples": (_set(sample_count=0), "sample for synthesizer: 0 of the 2 samples asked for came back"),
    "fewer samples than asked": (_set(sample_count=1), "1 of the 2 samples asked for came back"),
    "logprobs shorter than the tokens": (_set(logprobs_short_by=1),
                                         f"score the batch for {EITHER}: a scored sequence has"),
    "a save reply of another shape": (_set(replaced_results={"save_weights": {"path": 5}}),
                                      f"save the state for {EITHER}: the client could not read its reply"),
    "an optimizer reply that is no object": (
        _set(replaced_results={"optim_step": "garbage"}),
        f"take the optimizer step for {EITHER}: the client could not read"),
    "HTTP 500": (_set(fail_status=500), "sample for synthesizer: no reply within"),
    "HTTP 401": (_set(fail_status=401), "HTTP 401"),
    "a hang": (_stall, "sample for synthesizer: no reply within"),
}


@pytest.mark.parametrize("mode", HOSTILE)
def test_a_hostile_server_after_a_good_step_is_one_error_line_keeping_the_step(tinker, labeler, tmp_path,
                                                                               mode):
    turn, phrase = HOSTILE[mode]
    run = tmp_path / "run"
    turned = after_the_first_step(tinker, turn)
    result = CliRunner().invoke(app, ["run", str(pipeline(tmp_path, tinker, labeler)), "--run", str(run)])
    ended = time.monotonic()
    assert result.exit_code == 2, result.output
    line = the_error_line(result.stderr)
    assert re.search(phrase, line) and tinker.base_url in line and "fix:" in line and KEY not in line
    assert ("$TINKER_API_KEY" in line) == (mode == "HTTP 401")
    assert ended - turned["at"] < DEADLINE_S + 5  # the deadline, not the client's minutes of retries
    assert step_checkpointed(run) == 1 and (run / "problems.parquet").exists()


def test_a_tokenizer_the_server_names_but_that_cannot_be_loaded_names_the_setting(tinker, labeler, tmp_path):
    tinker.tokenizer_folder = tmp_path / "no-such-tokenizer"
    config = pipeline(tmp_path, tinker, labeler)
    result = CliRunner().invoke(app, ["run", str(config), "--run", str(tmp_path / "run")])
    assert result.exit_code == 2, result.output
    line = the_error_line(result.stderr)
    # the initial reasoner answers the held-out tasks first (cotrain_initial), so its tokenizer is the first loaded
    assert line.startswith("error: cotrain.reasoner.tokenizer: cannot load the tokenizer the server names")
    assert "fix: set cotrain.reasoner.tokenizer to a local folder holding Qwen/Qwen3-0.6B's" in line


def test_the_tokenizer_setting_replaces_the_one_the_server_names(tinker, labeler, tmp_path):
    folder, tinker.tokenizer_folder = tinker.tokenizer_folder, tmp_path / "no-such-tokenizer"
    policy = tinker_policy(tinker.base_url, tokenizer=str(folder))
    config = pipeline(tmp_path, tinker, labeler, synthesizer=policy, reasoner=policy)
    result = CliRunner().invoke(app, ["run", str(config), "--run", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output


# (the synthesizer's settings, the cotrain section's, the environment, the modules), and what the line says
SETTING_ERRORS = {
    "the key's variable is empty": ({}, {}, {"TINKER_API_KEY": ""}, {},
                                    "$TINKER_API_KEY is empty; fix: export TINKER_API_KEY="),
    "the client is not installed": ({}, {}, {}, {"tinker": None}, "fix: pip install 'sws[tinker]'"),
    "a tokenizer without a chat template": ({"chat_template": True}, {}, {}, {},
                                            "set cotrain.synthesizer.chat_template: false"),
    "a temperature other than 1": ({}, {"reasoner_temperature": 0.7}, {}, {},
                                   "scores tokens at temperature 1 but reasoner samples at 0.7"),
}


@pytest.mark.parametrize("error", SETTING_ERRORS)
def test_a_setting_the_tinker_backend_cannot_run_is_one_error_line(tinker, labeler, tmp_path, monkeypatch,
                                                                   error):
    synthesizer, cotrain, environment, modules, phrase = SETTING_ERRORS[error]
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    for name, module in modules.items():
        monkeypatch.setitem(sys.modules, name, module)
    policy = tinker_policy(tinker.base_url, **synthesizer)
    config = pipeline(tmp_path, tinker, labeler, synthesizer=policy, **cotrain)
    result = CliRunner().invoke(app, ["run", str(config), "--run", str(tmp_path / "run")])
    assert result.exit_code == 2, result.output
    assert phrase in the_error_line(result.stderr)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:DEPRECATED:FutureWarning")  # tinker 0.38 on loading into a live client
# The synthesizer updates on the thread beside the reasoner's update.
@pytest.mark.parametrize("turn, at", [(_stall, "forward_backward"), (_set(fail_status=500), "asample")],
                         ids=["a hang in the synthesizer's update", "HTTP 500 while sampling"])
def test_ctrl_c_during_a_hung_call_ends_the_run_within_5_seconds_and_the_rerun_resumes(tinker, labeler,
                                                                                       tmp_path, turn, at):
    run, config = tmp_path / "run", pipeline(tmp_path, tinker, labeler, call_deadline_s=600.0)
    turned = after_the_first_step(tinker, turn, at)
    ended, seconds = interrupt_when([sys.executable, "-m", "sws", "run", str(config), "--run", str(run)],
                                    lambda: bool(turned), "its second step")
    assert seconds < PROMPT_END_S, seconds
    assert ended.returncode == 130, ended.stderr
    assert "interrupted" in the_error_line(ended.stderr)
    assert step_checkpointed(run) == 1

    tinker.on_request, tinker.fail_status = None, None
    tinker.stall.clear()
    rerun = CliRunner().invoke(app, ["run", str(config), "--run", str(run)])
    assert rerun.exit_code == 0, rerun.output
    manifest = json.loads((run / "manifests" / "cotrain_cotrained.json").read_text())
    assert manifest["info"]["resumed_from_step"] == 1
