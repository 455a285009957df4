from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch
from trl import GRPOConfig, GRPOTrainer

from sws.cotrain.grpo import (
    clipped_surrogate_loss,
    completion_logps,
    group_advantages,
    shared_prompt_completion_logps,
    trim_whole_groups,
)
from sws.worlds.arith.policy import policy_config
from sws.worlds.arith.tokenizer import build_tokenizer


def _tiny_model():
    from transformers import Qwen2ForCausalLM
    tokenizer = build_tokenizer()
    torch.manual_seed(0)
    return Qwen2ForCausalLM(policy_config(len(tokenizer), tokenizer.eos_token_id, tokenizer.pad_token_id))


def _fixed_batch():
    generator = torch.Generator().manual_seed(1)
    prompt_ids = torch.randint(3, 200, (4, 6), generator=generator)
    prompt_mask = torch.ones_like(prompt_ids)
    prompt_mask[0, :2] = 0
    completion_ids = torch.randint(3, 200, (4, 5), generator=generator)
    completion_mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0], [1, 1, 0, 0, 0], [1, 1, 1, 1, 0]])
    old_logps = -torch.rand((4, 5), generator=generator) * 5
    advantages = torch.tensor([1.2, -0.4, 0.7, -1.5])
    return prompt_ids, prompt_mask, completion_ids, completion_mask, old_logps, advantages


def _trl_loss(model, config: GRPOConfig, temperature: float):
    """TRL's own `_compute_loss` run on a trainer stand-in that supplies only what a one-process, no-KL,
    no-entropy-bonus step reads; the per-token log-probabilities come from `completion_logps`."""
    prompt_ids, prompt_mask, completion_ids, completion_mask, old_logps, advantages = _fixed_batch()

    def logps_and_entropies(_model, input_ids, attention_mask, logits_to_keep, **_):
        logps = completion_logps(_model, input_ids, attention_mask, logits_to_keep, temperature)
        return logps, torch.zeros_like(logps), None

    accelerator = SimpleNamespace(num_processes=1, gather=lambda x: x, reduce=lambda x, reduction: x,
                                  gather_for_metrics=lambda x: x)
    trainer = SimpleNamespace(
        _get_per_token_logps_and_entropies=logps_and_entropies, aux_loss_enabled=False, top_entropy_quantile=1.0,
        off_policy_mask_threshold=None, importance_sampling_level=config.importance_sampling_level,
        beta=config.beta, loss_type=config.loss_type, epsilon_low=config.epsilon,
        epsilon_high=config.epsilon_high if config.epsilon_high is not None else config.epsilon, args=config,
        use_vllm=False, model=model, accelerator=accelerator, current_gradient_accumulation_steps=1,
        _entropy_bonus_enabled=False, _metrics=defaultdict(lambda: defaultdict(list)),
    )
    inputs = {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask, "completion_ids": completion_ids,
              "completion_mask": completion_mask, "advantages": advantages, "old_per_token_logps": old_logps,
              "num_items_in_batch": completion_mask.sum()}
    return GRPOTrainer._compute_loss(trainer, model, inputs)


def _our_loss(model, temperature: float):
    prompt_ids, prompt_mask, completion_ids, completion_mask, old_logps, advantages = _fixed_batch()
    logps = completion_logps(model, torch.cat([prompt_ids, completion_ids], 1),
                             torch.cat([prompt_mask, completion_mask], 1), completion_ids.shape[1], temperature)
    return clipped_surrogate_loss(logps, old_logps, advantages, completion_mask)


def _gradient(model):
    return torch.cat([p.grad.flatten() for p in model.parameters() if p.grad is not None])


def test_loss_value_and_gradient_equal_trl_default_grpo_loss(tmp_path):
    config = GRPOConfig(output_dir=str(tmp_path), report_to=[], use_cpu=True, bf16=False)
    assert (config.loss_type, config.beta, config.importance_sampling_level) == ("dapo", 0.0, "token")
    model = _tiny_model()
    model.train()
    trl_loss = _trl_loss(model, config, temperature=0.7)
    trl_loss.backward()
    trl_gradient = _gradient(model).clone()
    model.zero_grad(set_to_none=True)
    our_loss = _our_loss(model, temperature=0.7)
    our_loss.backward()
    assert our_loss.item() != 0
    assert abs(our_loss.item() - trl_loss.item()) < 1e-6
    assert torch.allclose(_gradient(model), trl_gradient, atol=1e-6, rtol=0)


def test_group_advantages_normalise_within_each_group():
    advantages = group_advantages([1.0, 0.0, 1.0, 1.0, 0.5, 0.5], [0, 0, 0, 0, 1, 1])
    first = torch.tensor([1.0, 0.0, 1.0, 1.0])
    expected = ((first - first.mean()) / (first.std() + 1e-4)).tolist()
    assert advantages[:4] == pytest.approx(expected)
    assert advantages[4:] == [0.0, 0.0]


def test_group_of_one_is_refused():
    with pytest.raises(ValueError, match="at least 2"):
        group_advantages([1.0, 0.0, 1.0], [0, 0, 1])


def test_trimming_keeps_whole_groups():
    # groups of 3, 3 and 2 rows trimmed to a multiple of 4: the last group goes, then the middle one
    ids = [7, 7, 7, 8, 8, 8, 9, 9]
    kept = trim_whole_groups(ids, 4)
    kept_ids = [ids[i] for i in kept]
    assert len(kept_ids) % 4 == 0
    for group in set(kept_ids):
        assert kept_ids.count(group) == ids.count(group)
    assert trim_whole_groups([1, 1, 2, 2], 2) == [0, 1, 2, 3]


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_a_shared_prompt_run_once_gives_the_same_loss_and_gradient_as_every_row_in_full(temperature):
    _, _, completion_ids, completion_mask, old_logps, advantages = _fixed_batch()
    prompt = torch.randint(3, 200, (1, 30), generator=torch.Generator().manual_seed(2))
    rows = completion_ids.shape[0]
    results = []
    for shared in (False, True):
        model = _tiny_model()
        model.train()
        if shared:
            logps = shared_prompt_completion_logps(model, prompt, completion_ids, completion_mask, temperature)
        else:
            logps = completion_logps(model, torch.cat([prompt.expand(rows, -1), completion_ids], 1),
                                     torch.cat([torch.ones(rows, 30, dtype=torch.long), completion_mask], 1),
                                     completion_ids.shape[1], temperature)
        loss = clipped_surrogate_loss(logps, old_logps, advantages, completion_mask)
        loss.backward()
        results.append((logps[completion_mask.bool()].detach(), loss.detach(), _gradient(model)))
    (full_logps, full_loss, full_gradient), (logps, loss, gradient) = results
    assert torch.allclose(logps, full_logps, atol=1e-5)
    assert torch.allclose(loss, full_loss, atol=1e-6)
    assert torch.allclose(gradient, full_gradient, atol=1e-6, rtol=1e-4)
