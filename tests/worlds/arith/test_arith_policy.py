import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from sws.worlds.arith.policy import HEAD_DIM, build_policy
from sws.worlds.arith.tokenizer import build_tokenizer


def test_policy_folder_loads_with_auto_classes(tmp_path):
    folder = build_policy(tmp_path / "policy", seed=0)
    model = AutoModelForCausalLM.from_pretrained(folder)
    tokenizer = AutoTokenizer.from_pretrained(folder)
    assert model.config.model_type == "qwen2"
    assert model.config.head_dim == HEAD_DIM == model.config.hidden_size // model.config.num_attention_heads
    assert 0.8e6 <= sum(p.numel() for p in model.parameters()) <= 1.5e6
    text = "Compute 47+85.\n\\boxed{132}"
    assert tokenizer(text)["input_ids"] == build_tokenizer()(text)["input_ids"]
    assert tokenizer.decode(tokenizer(text)["input_ids"]) == text
    assert tokenizer.eos_token_id == model.config.eos_token_id == model.generation_config.eos_token_id
    assert tokenizer.pad_token_id == model.generation_config.pad_token_id
    output = model.generate(**tokenizer([text], return_tensors="pt"), max_new_tokens=3, do_sample=False)
    assert output.shape[1] <= len(text) + 3


def test_same_seed_same_weights(tmp_path):
    first = AutoModelForCausalLM.from_pretrained(build_policy(tmp_path / "a", seed=1))
    second = AutoModelForCausalLM.from_pretrained(build_policy(tmp_path / "b", seed=1))
    third = AutoModelForCausalLM.from_pretrained(build_policy(tmp_path / "c", seed=2))
    weight = "model.layers.0.mlp.up_proj.weight"
    assert torch.equal(first.state_dict()[weight], second.state_dict()[weight])
    assert not torch.equal(first.state_dict()[weight], third.state_dict()[weight])
