import pytest
import torch

from sws.cotrain.grpo import clipped_surrogate_loss, completion_logps
from sws.cotrain.learner import Completion, SamplingSettings, ScoredCompletion, TorchLearner
from sws.worlds.arith.policy import build_policy


def _learner(tmp_path):
    return TorchLearner(build_policy(tmp_path / "policy"), learning_rate=1e-3)


def _weights(learner):
    return torch.cat([p.detach().flatten().clone() for p in learner.model.parameters()])


def test_temperature_and_system_prompt_reach_the_model(tmp_path, monkeypatch):
    learner = _learner(tmp_path)
    seen = {}
    generate = learner.model.generate

    def spy(**kwargs):
        seen.update(kwargs)
        return generate(**kwargs)

    monkeypatch.setattr(learner.model, "generate", spy)
    settings = SamplingSettings(temperature=0.3, max_new_tokens=4, system_prompt="S>")
    groups = learner.sample(["Compute 1 + 2.\n"], 3, settings)
    assert seen["temperature"] == 0.3 and seen["max_new_tokens"] == 4 and seen["num_return_sequences"] == 3
    prompt_text = learner.tokenizer.decode(seen["input_ids"][0], skip_special_tokens=True)
    assert prompt_text == "S>Compute 1 + 2.\n"
    assert [len(group) for group in groups] == [3] and groups[0][0].prompt == "Compute 1 + 2.\n"


def test_update_changes_weights_and_save_load_restores_them(tmp_path):
    learner = _learner(tmp_path)
    before = _weights(learner)
    settings = SamplingSettings()
    batch = [ScoredCompletion(Completion("Compute {1}+2.\n", "\\boxed{3}"), 1.0),
             ScoredCompletion(Completion("Compute {1}+2.\n", "\\boxed{4}"), -1.0)]
    learner.forward_backward(batch, settings)
    learner.optim_step()
    after = _weights(learner)
    assert not torch.equal(before, after)
    learner.save(tmp_path / "saved")
    other = _learner(tmp_path)
    other.load(tmp_path / "saved")
    assert torch.equal(_weights(other), after)
    assert other.optimizer.state_dict()["state"].keys() == learner.optimizer.state_dict()["state"].keys()


def test_prompts_keep_their_braces(tmp_path):
    learner = _learner(tmp_path)
    problem = r"Compute \frac{1}{2}+x^{2}." + "\n"
    prompt_ids, prompt_mask, _, _ = learner.encode_batch(
        [ScoredCompletion(Completion(problem, "x"), 0.0)], SamplingSettings(system_prompt="{role}"))
    assert learner.tokenizer.decode(prompt_ids[0][prompt_mask[0] == 1]) == "{role}" + problem


def _full_pass(learner, batch, settings):
    """The loss and gradient with every row through the model, zero advantages included."""
    prompt_ids, prompt_mask, completion_ids, completion_mask = learner.encode_batch(batch, settings)
    logps = completion_logps(learner.model, torch.cat([prompt_ids, completion_ids], 1),
                             torch.cat([prompt_mask, completion_mask], 1), completion_ids.shape[1])
    advantages = torch.tensor([item.advantage for item in batch])
    loss = clipped_surrogate_loss(logps, logps.detach(), advantages, completion_mask)
    loss.backward()
    return loss.item(), [p.grad.clone() for p in learner.model.parameters()]


@pytest.mark.parametrize("advantages", [[0.0, 1.2, 0.0, -0.7, 0.0], [0.0] * 5])
@pytest.mark.parametrize("shared_prompt", [True, False])
def test_rows_of_zero_advantage_skip_the_model_and_change_neither_loss_nor_gradient(tmp_path, advantages,
                                                                                       shared_prompt):
    prompts = ["Compute 12+30.\n"] * 5 if shared_prompt else [f"Compute {'9' * n}+1.\n" for n in range(1, 6)]
    texts = ["\\boxed{42}", "\\boxed{4}", "\\boxed{420}", "7", "\\boxed{42} done"]
    batch = [ScoredCompletion(Completion(prompt, text), advantage)
             for prompt, text, advantage in zip(prompts, texts, advantages, strict=True)]
    settings = SamplingSettings()
    skipping, full = _learner(tmp_path), _learner(tmp_path)
    loss = skipping.forward_backward(batch, settings)
    full_loss, full_gradient = _full_pass(full, batch, settings)
    assert loss == pytest.approx(full_loss, abs=1e-6)
    gradient = [p.grad for p in skipping.model.parameters()]
    assert all(g is not None for g in gradient)
    assert any(g.abs().sum() > 0 for g in full_gradient) == any(a != 0 for a in advantages)
    for ours, theirs in zip(gradient, full_gradient, strict=True):
        assert torch.allclose(ours, theirs, atol=1e-6, rtol=1e-4)
