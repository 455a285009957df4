"""The Tinker backend sends, through the real client library's types, exactly the batch the local learner trains
on, and the server's `ppo` loss on those datums has the local loss's value and gradient."""

from pathlib import Path

import numpy as np
import pytest
import torch

tinker = pytest.importorskip("tinker")

from sws.cotrain.learner import Completion, SamplingSettings, ScoredCompletion, TorchLearner  # noqa: E402
from sws.cotrain.tinker_learner import (  # noqa: E402
    STATE_FILE,
    CallDeadline,
    TinkerLearner,
    token_advantages,
    tokenize_batch,
)
from sws.errors import UserError  # noqa: E402
from sws.worlds.arith.policy import build_policy  # noqa: E402
from sws.worlds.arith.tokenizer import build_tokenizer  # noqa: E402

SETTINGS = SamplingSettings(temperature=1.0, max_new_tokens=8, system_prompt="S: ")
BATCH = [ScoredCompletion(Completion("3+4=", "7"), 1.5), ScoredCompletion(Completion("12*3=", "36"), -0.5),
         ScoredCompletion(Completion("12*3=", "x{1}"), -1.0), ScoredCompletion(Completion("9-9=", "0"), 0.0)]


@pytest.fixture(scope="module")
def local_learner(tmp_path_factory) -> TorchLearner:
    return TorchLearner(build_policy(tmp_path_factory.mktemp("tiny") / "policy"), learning_rate=1e-3)


def test_the_datums_carry_the_local_learners_tokens_mask_and_advantages(local_learner: TorchLearner) -> None:
    prompt_ids, prompt_mask, completion_ids, completion_mask = local_learner.encode_batch(BATCH, SETTINGS)
    rows = tokenize_batch(local_learner.tokenizer, BATCH, SETTINGS, chat=False)
    total = completion_mask.sum().item()
    for i, (row, advantages) in enumerate(zip(rows, token_advantages(rows), strict=True)):
        prompt = prompt_ids[i][prompt_mask[i].bool()].tolist()
        completion = completion_ids[i][completion_mask[i].bool()].tolist()
        assert row.input_tokens + row.target_tokens[-1:] == prompt + completion
        assert row.target_tokens == (prompt + completion)[1:]
        assert row.mask == [0.0] * (len(prompt) - 1) + [1.0] * len(completion)
        assert advantages == pytest.approx([m * BATCH[i].advantage / total for m in row.mask])
    assert "{1}" in local_learner.tokenizer.decode(rows[2].target_tokens)


def _tinker_ppo_loss(model: torch.nn.Module, rows) -> torch.Tensor:
    """Tinker's documented `ppo` loss, in torch, on the datums: old log-probabilities are the model's own."""
    total = torch.zeros(())
    for row, advantages in zip(rows, token_advantages(rows), strict=True):
        logits = model(input_ids=torch.tensor([row.input_tokens])).logits[0]
        logprobs = torch.log_softmax(logits.float(), -1).gather(-1, torch.tensor(row.target_tokens)[:, None])[:, 0]
        ratio = torch.exp(logprobs - logprobs.detach())
        advantage = torch.tensor(advantages)
        total = total - torch.min(ratio * advantage, torch.clamp(ratio, 0.8, 1.2) * advantage).sum()
    return total


def test_the_servers_ppo_loss_on_the_datums_equals_the_local_loss_and_gradient(local_learner) -> None:
    model = local_learner.model
    model.zero_grad(set_to_none=True)
    local_value = local_learner.forward_backward(BATCH, SETTINGS)
    local_grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    model.train()
    remote = _tinker_ppo_loss(model, tokenize_batch(local_learner.tokenizer, BATCH, SETTINGS, chat=False))
    remote.backward()
    assert remote.item() == pytest.approx(local_value, abs=1e-6)
    for local, theirs in zip(local_grads, (p.grad for p in model.parameters()), strict=True):
        torch.testing.assert_close(theirs, local, atol=1e-6, rtol=1e-5)
    model.zero_grad(set_to_none=True)


class _Done:
    def __init__(self, value) -> None:
        self.value = value

    def result(self, timeout=None):
        return self.value


class _Sampler:
    def __init__(self, tokenizer, log: list) -> None:
        self.tokenizer, self.log = tokenizer, log

    def sample(self, prompt, num_samples, sampling_params):
        self.log.append(("sample", prompt, num_samples, sampling_params))
        tokens = self.tokenizer("42", add_special_tokens=False)["input_ids"]
        sequences = [tinker.types.SampledSequence(stop_reason="stop", sequence_id=str(i), tokens_np=np.array(tokens))
                     for i in range(num_samples)]
        return _Done(tinker.types.SampleResponse(sequences=sequences))


class _TrainingClient:
    """Records every request; answers forward passes with log-probability -1 per target token."""

    def __init__(self, tokenizer) -> None:
        self.tokenizer, self.log = tokenizer, []

    def _output(self, data):
        outputs = [{"logprobs": tinker.types.TensorData.from_numpy(
            np.full(len(d.loss_fn_inputs["target_tokens"].tolist()), -1.0, dtype=np.float32))} for d in data]
        return _Done(tinker.types.ForwardBackwardOutput(loss_fn_output_type="", loss_fn_outputs=outputs,
                                                        metrics={"loss:sum": 0.25}))

    def forward(self, data, loss_fn):
        self.log.append(("forward", data, loss_fn, None))
        return self._output(data)

    def forward_backward(self, data, loss_fn, loss_fn_config=None):
        self.log.append(("forward_backward", data, loss_fn, loss_fn_config))
        return self._output(data)

    def optim_step(self, adam):
        self.log.append(("optim_step", adam))
        return _Done(None)

    def save_weights_and_get_sampling_client(self):
        self.log.append(("sampler",))
        return _Done(_Sampler(self.tokenizer, self.log))

    def save_state(self, name, overwrite):
        self.log.append(("save_state", name, overwrite))
        return _Done(tinker.types.SaveWeightsResponse(path=f"tinker://run/{name}"))

    def load_state_with_optimizer(self, path):
        self.log.append(("load_state", path))
        return _Done(None)


@pytest.fixture
def remote() -> TinkerLearner:
    tokenizer = build_tokenizer()
    return TinkerLearner(_TrainingClient(tokenizer), tokenizer, learning_rate=3e-6, name="synthesizer",
                         chat_template=False,  # the arith tokenizer has none
                         deadline=CallDeadline(30.0, 1000.0))


def test_a_training_step_sends_the_forward_then_the_ppo_datums(remote: TinkerLearner) -> None:
    rows = tokenize_batch(remote.tokenizer, BATCH, SETTINGS, chat=False)
    value = remote.forward_backward(BATCH, SETTINGS)
    remote.optim_step()
    (_, forward, forward_loss, _), (_, data, loss, config), (_, adam) = remote.training_client.log[1:]
    assert (forward_loss, loss) == ("cross_entropy", "ppo")
    assert config == {"clip_low_threshold": pytest.approx(0.8), "clip_high_threshold": pytest.approx(1.2)}
    for datum, row, advantages in zip(data, rows, token_advantages(rows), strict=True):
        assert isinstance(datum, tinker.types.Datum) and datum.model_input.to_ints() == row.input_tokens
        inputs = {key: tensor.tolist() for key, tensor in datum.loss_fn_inputs.items()}
        assert inputs["target_tokens"] == row.target_tokens
        assert inputs["advantages"] == pytest.approx(advantages)
        assert inputs["logprobs"] == [-1.0] * len(row.target_tokens)
    assert [d.loss_fn_inputs["weights"].tolist() for d in forward] == [row.mask for row in rows]
    assert value == 0.25  # the server's summed loss
    assert (adam.learning_rate, adam.weight_decay, adam.grad_clip_norm) == (3e-6, 0.0, 1.0)


def test_sampling_sends_the_roles_system_prompt_temperature_and_length(remote: TinkerLearner) -> None:
    settings = SamplingSettings(temperature=0.6, max_new_tokens=5, system_prompt="You write tasks. ")
    completions = remote.sample(["1+1="], 3, settings)
    _, prompt, n, params = remote.training_client.log[-1]
    assert remote.tokenizer.decode(prompt.to_ints()) == "You write tasks. 1+1="
    assert (n, params.temperature, params.max_tokens) == (3, 0.6, 5)
    assert params.stop == [remote.tokenizer.eos_token_id]
    assert completions == [[Completion("1+1=", "42", tokens=2)] * 3]  # the server sent two tokens


def test_training_at_another_temperature_than_one_is_refused(remote: TinkerLearner) -> None:
    with pytest.raises(UserError, match="temperature 1"):
        remote.forward_backward(BATCH, SamplingSettings(temperature=0.7))


def test_save_and_load_go_through_the_servers_state_with_the_optimizer(remote, tmp_path: Path) -> None:
    remote.forward_backward(BATCH, SETTINGS)
    remote.optim_step()
    remote.save(tmp_path)
    assert (tmp_path / STATE_FILE).read_text().count("tinker://run/synthesizer-000001") == 1
    remote.version = 7
    remote.load(tmp_path)
    assert remote.version == 1
    assert ("save_state", "synthesizer-000001", True) in remote.training_client.log
    assert remote.training_client.log[-2:] == [("load_state", "tinker://run/synthesizer-000001"), ("sampler",)]


def test_the_ppo_request_encodes_on_the_wire_with_the_batchs_tokens_and_advantages(remote) -> None:
    from tinker.proto.request_conv import forward_backward_request_to_proto
    remote.forward_backward(BATCH, SETTINGS)
    _, data, loss, config = remote.training_client.log[-1]
    request = tinker.types.ForwardBackwardRequest(
        forward_backward_input=tinker.types.ForwardBackwardInput(data=data, loss_fn=loss, loss_fn_config=config),
        model_id="synthesizer", seq_id=1)
    message = forward_backward_request_to_proto(request)
    sent = type(message).FromString(message.SerializeToString())
    rows = tokenize_batch(remote.tokenizer, BATCH, SETTINGS, chat=False)
    assert sent.loss_fn == "ppo" and len(sent.data) == len(rows)
    for datum, row, advantages in zip(sent.data, rows, token_advantages(rows), strict=True):
        chunks = [np.frombuffer(chunk.encoded_text.tokens, np.int32) for chunk in datum.model_input]
        assert np.concatenate(chunks).tolist() == row.input_tokens
        inputs = datum.loss_fn_inputs
        assert np.frombuffer(inputs["target_tokens"].dense, np.int64).tolist() == row.target_tokens
        np.testing.assert_allclose(np.frombuffer(inputs["advantages"].dense, np.float32), advantages, rtol=1e-6)
