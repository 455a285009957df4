"""The Tinker backend through the real `tinker` client library over HTTP, against the fake Tinker-API server in
tests/_tinker_server.py: what connect, a training step, sampling, save and load put on the wire, and how a
server that rejects the key, fails or hangs ends (one line, in bounded time).

The client's `get_tokenizer` loads the tokenizer named by the server's get_info; the fake server names a folder
holding the arith world's tokenizer, so nothing is patched and no hub is asked."""

import time
from pathlib import Path

import pytest

pytest.importorskip("tinker")

from _http_serving import running  # noqa: E402
from _tinker_server import SAMPLE_TEXT, TARGET_LOGPROB, FakeTinker  # noqa: E402

from sws.cotrain.backend import CotrainBackendConfig, make_learner  # noqa: E402
from sws.cotrain.learner import Completion, SamplingSettings, ScoredCompletion  # noqa: E402
from sws.cotrain.tinker_learner import (  # noqa: E402
    STATE_FILE,
    CallDeadline,
    token_advantages,
    tokenize_batch,
)
from sws.errors import UserError  # noqa: E402
from sws.worlds.arith.tokenizer import build_tokenizer  # noqa: E402

KEY = "tml-wire-test-secret-0123456789"
BASE_MODEL = "Qwen/Qwen3-0.6B"
SETTINGS = SamplingSettings(temperature=1.0, max_new_tokens=8, system_prompt="S: ")
BATCH = [ScoredCompletion(Completion("3+4=", "7"), 1.5), ScoredCompletion(Completion("12*3=", "36"), -0.5),
         ScoredCompletion(Completion("9-9=", "0"), 0.0)]
# A chat template of the kind instruct models ship: each message on its own line after its role's tag.
CHAT_TEMPLATE = ("{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
                 "{% if add_generation_prompt %}<assistant>{% endif %}")
BOUND_S = 3.0  # the deadlines the failure tests give the learner


@pytest.fixture(scope="module")
def tokenizer():
    tokenizer = build_tokenizer()
    tokenizer.chat_template = CHAT_TEMPLATE
    return tokenizer


@pytest.fixture(scope="module")
def tokenizer_folder(tokenizer, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("tinker-tokenizer")
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture
def fake(tokenizer, tokenizer_folder, monkeypatch):
    monkeypatch.setenv("TINKER_TELEMETRY", "0")  # the client would post its telemetry to the server
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TINKER_API_KEY", KEY)
    sample_tokens = tokenizer(SAMPLE_TEXT, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    server = FakeTinker(tokenizer_folder, sample_tokens, echo_key=True)
    with running(server):
        yield server
        server.stall.clear()


def _backend(server: FakeTinker, chat_template: bool = True, deadline_s: float = 30.0
             ) -> CotrainBackendConfig:
    policy = {"base_url": server.base_url, "base_model": BASE_MODEL, "lora_rank": 8, "chat_template": chat_template}
    return CotrainBackendConfig(backend="tinker", synthesizer=policy, reasoner=policy,
                                call_deadline_s=deadline_s)


def _connect(server: FakeTinker, tmp_path: Path, chat_template: bool = True, deadline_s: float = 30.0):
    return make_learner(_backend(server, chat_template, deadline_s), "synthesizer", tmp_path / "unused",
                        learning_rate=3e-6, seed=7)


@pytest.fixture
def connect(fake, tmp_path):
    """Connects learners to the fake server, and finishes their sessions after the test: an open session's
    heartbeat would outlive the server and warn for the rest of the test run."""
    learners = []

    def connect(chat_template: bool = True, deadline_s: float = 30.0):
        learners.append(_connect(fake, tmp_path, chat_template, deadline_s))
        return learners[-1]

    yield connect
    for learner in learners:
        learner.close(succeeded=False)


def _sent_prompts(server: FakeTinker) -> list[list[int]]:
    """The prompts of the sampling requests, sorted: the requests go out concurrently, in either order."""
    return sorted(chunk["tokens"] for body in server.bodies("asample") for chunk in body["prompt"]["chunks"])


def test_connect_creates_a_lora_adapter_on_the_base_model_sending_the_key(fake, connect, tmp_path) -> None:
    learner = connect()
    paths = [path.removeprefix("/api/v1/") for path, _ in fake.requests]
    assert paths[:4] == ["client/config", "client/dynamic_config", "create_session", "create_model"]
    assert {"get_info", "save_weights_for_sampler"} <= set(paths)
    (created,) = fake.bodies("create_model")
    assert (created["base_model"], created["lora_config"]["rank"], created["lora_config"]["seed"]) == (
        BASE_MODEL, 8, 7)
    assert created["session_id"] == "session-0"  # the session the client created first
    assert set(fake.api_keys) == {KEY}  # in the X-API-Key header of every request
    assert learner.tokenizer("1+1=")["input_ids"] == build_tokenizer()("1+1=")["input_ids"]


def test_a_training_step_sends_the_forward_then_the_ppo_datums_then_adam(fake, connect, tokenizer, tmp_path) -> None:
    learner = connect()
    value = learner.forward_backward(BATCH, SETTINGS)
    learner.optim_step()
    rows = tokenize_batch(tokenizer, BATCH, SETTINGS, chat=True)
    forward, ppo = fake.bodies("forward_backward")
    assert (forward["loss_fn"], forward["forward_only"], ppo["loss_fn"], ppo["forward_only"]) == (
        "cross_entropy", True, "ppo", False)
    assert ppo["loss_fn_config"] == {"clip_low_threshold": pytest.approx(0.8), "clip_high_threshold": pytest.approx(1.2)}
    for sent, row in zip(forward["data"], rows, strict=True):
        assert sent["input_tokens"] == row.input_tokens
        assert sent["loss_fn_inputs"] == {"target_tokens": row.target_tokens, "weights": row.mask}
    completion_tokens = sum(sum(row.mask) for row in rows)
    for sent, row, item in zip(ppo["data"], rows, BATCH, strict=True):
        assert sent["input_tokens"] == row.input_tokens
        inputs = sent["loss_fn_inputs"]
        assert inputs["target_tokens"] == row.target_tokens
        assert inputs["logprobs"] == [TARGET_LOGPROB] * len(row.target_tokens)  # the forward pass's answer
        prompt, completion = row.mask.count(0.0), row.mask.count(1.0)
        assert inputs["advantages"] == pytest.approx([0.0] * prompt + [item.advantage / completion_tokens] * completion)
    assert value == pytest.approx(-sum(sum(a) for a in token_advantages(rows)))  # the server's loss:sum
    (step,) = fake.bodies("optim_step")
    assert step["adam_params"] == {"learning_rate": 3e-6, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                                   "weight_decay": 0.0, "grad_clip_norm": 1.0}


def test_sampling_sends_the_prompt_n_temperature_length_and_eos_stop(fake, connect, tokenizer, tmp_path) -> None:
    learner = connect()
    settings = SamplingSettings(temperature=0.6, max_new_tokens=5, system_prompt="You write tasks. ")
    completions = learner.sample(["1+1=", "2*3="], 3, settings)
    assert _sent_prompts(fake) == sorted(  # the chat template's rendering, ready for the reply
        tokenizer(f"<system>You write tasks. \n<user>{prompt}\n<assistant>", add_special_tokens=False)["input_ids"]
        for prompt in ("1+1=", "2*3="))
    for body in fake.bodies("asample"):
        params = body["sampling_params"]
        assert (body["num_samples"], params["temperature"], params["max_tokens"], params["stop"]) == (
            3, 0.6, 5, [tokenizer.eos_token_id])
    generated = len(SAMPLE_TEXT) + 1  # the server's tokens: the text's characters and EOS
    assert completions == [[Completion("1+1=", SAMPLE_TEXT, generated)] * 3,
                           [Completion("2*3=", SAMPLE_TEXT, generated)] * 3]


def test_a_base_model_policy_samples_and_trains_on_plain_text(fake, connect, tokenizer, tmp_path) -> None:
    learner = connect(chat_template=False)
    learner.sample(["1+1="], 2, SETTINGS)
    assert _sent_prompts(fake) == [tokenizer("S: 1+1=", add_special_tokens=False)["input_ids"]]
    learner.forward_backward(BATCH[:1], SETTINGS)
    forward, _ = fake.bodies("forward_backward")
    prompt = tokenizer("S: 3+4=", add_special_tokens=False)["input_ids"]
    assert forward["data"][0]["input_tokens"][:len(prompt)] == prompt
    assert forward["data"][0]["loss_fn_inputs"]["weights"].count(0.0) == len(prompt) - 1


def test_the_chat_prompt_trained_on_is_the_one_sampled(fake, connect, tokenizer, tmp_path) -> None:
    learner = connect()
    learner.sample(["3+4="], 2, SETTINGS)
    learner.forward_backward(BATCH[:1], SETTINGS)
    (sampled,) = _sent_prompts(fake)
    forward, _ = fake.bodies("forward_backward")
    assert forward["data"][0]["input_tokens"][:len(sampled)] == sampled
    assert forward["data"][0]["loss_fn_inputs"]["weights"].count(0.0) == len(sampled) - 1


def test_a_tokenizer_without_a_chat_template_is_refused_in_one_line(tmp_path, monkeypatch) -> None:
    plain = build_tokenizer()
    plain.save_pretrained(tmp_path / "plain")
    monkeypatch.setenv("TINKER_TELEMETRY", "0")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TINKER_API_KEY", KEY)
    with running(FakeTinker(tmp_path / "plain", [plain.eos_token_id])) as server:
        with pytest.raises(UserError) as refused:
            _connect(server, tmp_path)
    message = str(refused.value)
    assert "\n" not in message and "no chat template" in message
    assert "cotrain.synthesizer.chat_template: false" in message


def test_save_keeps_the_state_path_and_load_asks_for_it_with_the_optimizer(fake, connect, tmp_path) -> None:
    learner = connect()
    learner.forward_backward(BATCH, SETTINGS)
    learner.optim_step()
    folder = tmp_path / "synthesizer"
    learner.save(folder)
    (saved,) = fake.bodies("save_weights")
    assert (saved["path"], saved["overwrite"]) == ("synthesizer-000001", True)
    state_path = "tinker://model-0/weights/synthesizer-000001"
    assert (folder / STATE_FILE).read_text().count(state_path) == 1
    learner.version = 9
    with pytest.warns(FutureWarning, match="load_state"):  # 0.38 deprecates loading into a live client
        learner.load(folder)
    (loaded,) = fake.bodies("load_weights")
    assert (loaded["path"], loaded["optimizer"]) == (state_path, True)
    assert learner.version == 1
    assert [path for path, _ in fake.requests][-2] == "/api/v1/save_weights_for_sampler"  # then a fresh sampler
    assert all(KEY.encode() not in path.read_bytes() for path in tmp_path.rglob("*") if path.is_file())


def _one_line_naming_the_server(error: UserError, server: FakeTinker) -> str:
    message = str(error)
    assert "\n" not in message and server.base_url in message and "fix:" in message
    assert KEY not in message
    return message


@pytest.mark.parametrize("failure, reason", [(401, "HTTP 401"), (500, "no reply within"),
                                             ("hang", "no reply within")])
def test_connect_to_a_failing_server_ends_in_one_line_in_bounded_time(fake, connect, tmp_path, failure,
                                                                       reason) -> None:
    if failure == "hang":
        fake.stall.set()
    else:
        fake.fail_status = failure
    started = time.monotonic()
    with pytest.raises(UserError) as caught:
        connect(deadline_s=BOUND_S)
    assert time.monotonic() - started < BOUND_S + 2
    message = _one_line_naming_the_server(caught.value, fake)
    assert reason in message and ("TINKER_API_KEY" in message) == (failure == 401)


@pytest.mark.parametrize("failure", [401, 500, "hang"])
def test_a_server_failing_mid_training_ends_the_step_in_one_line_in_bounded_time(fake, connect, tmp_path, failure) -> None:
    learner = connect()
    learner.deadline = CallDeadline(BOUND_S, tokens_per_s=1e9)  # the batch's tokens add nothing
    if failure == "hang":
        fake.stall.set()
    else:
        fake.fail_status = failure
    started = time.monotonic()
    with pytest.raises(UserError, match="score the batch for synthesizer") as caught:
        learner.forward_backward(BATCH, SETTINGS)
    assert time.monotonic() - started < BOUND_S + 2
    _one_line_naming_the_server(caught.value, fake)


def test_a_call_is_waited_on_longer_by_the_tokens_it_sends(fake, connect, tokenizer) -> None:
    learner = connect()
    sent = sum(len(row.input_tokens) for row in tokenize_batch(tokenizer, BATCH, SETTINGS, chat=True))
    learner.deadline = CallDeadline(1.0, tokens_per_s=sent / 1.5)  # the batch adds 1.5 s
    fake.stall.set()
    started = time.monotonic()
    with pytest.raises(UserError, match=r"score the batch for synthesizer: no reply within 2\.5 s"):
        learner.forward_backward(BATCH, SETTINGS)
    assert 2.5 <= time.monotonic() - started < 4.5


def test_a_key_the_client_refuses_is_named_in_one_line(fake, connect, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("TINKER_API_KEY", "not-a-tinker-key")
    with pytest.raises(UserError, match=r"tml-.*fix:|fix:.*tml-") as caught:
        connect()
    assert "\n" not in str(caught.value)


def test_closing_finishes_the_session_as_the_arm_ended(fake, connect, tmp_path) -> None:
    connect().close(succeeded=True)
    assert [body["reason"]["type"] for body in fake.bodies("sessions/session-0/finish")] == ["success"]
    connect().close(succeeded=False)  # sent, not awaited: the arm's own error is what counts
    deadline = time.monotonic() + BOUND_S
    while len(fake.bodies("sessions/session-0/finish")) < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [body["reason"]["type"] for body in fake.bodies("sessions/session-0/finish")] == ["success", "errored"]
