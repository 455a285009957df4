"""The tiny policy: a randomly initialised Qwen2 causal LM of about 1 M parameters over the character tokenizer.

Saved as a normal Hugging Face folder (config, safetensors weights, tokenizer, generation config) so that
transformers, TRL and vLLM all load it. It reads `f"{problem}\\n"` and answers `\\boxed{<int>}` then EOS.
"""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

from sws.worlds.arith.tokenizer import build_tokenizer

HIDDEN_SIZE = 128
N_HEADS = 4
HEAD_DIM = 32  # 128 / 4; a head size vLLM's CPU attention supports
N_LAYERS = 4
INTERMEDIATE_SIZE = 512
MAX_POSITIONS = 128


def architecture() -> dict[str, int]:
    """The constants that decide the policy's shape; part of the bootstrap cache key."""
    return {"hidden_size": HIDDEN_SIZE, "n_heads": N_HEADS, "head_dim": HEAD_DIM, "n_layers": N_LAYERS,
            "intermediate_size": INTERMEDIATE_SIZE, "max_positions": MAX_POSITIONS}


def policy_config(vocab_size: int, eos_token_id: int, pad_token_id: int,
                  max_positions: int = MAX_POSITIONS) -> Qwen2Config:
    return Qwen2Config(
        vocab_size=vocab_size, hidden_size=HIDDEN_SIZE, intermediate_size=INTERMEDIATE_SIZE,
        num_hidden_layers=N_LAYERS, num_attention_heads=N_HEADS, num_key_value_heads=N_HEADS, head_dim=HEAD_DIM,
        max_position_embeddings=max_positions, tie_word_embeddings=True, bos_token_id=eos_token_id,
        eos_token_id=eos_token_id, pad_token_id=pad_token_id, torch_dtype="float32",
    )


def build_policy(out_dir: Path, seed: int = 0, max_positions: int = MAX_POSITIONS,
                 max_new_tokens: int = 16) -> Path:
    """Write a freshly initialised tiny policy (weights from `seed`) with its tokenizer to `out_dir`."""
    out_dir = Path(out_dir)
    tokenizer = build_tokenizer()
    tokenizer.model_max_length = max_positions
    config = policy_config(len(tokenizer), tokenizer.eos_token_id, tokenizer.pad_token_id, max_positions)
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.eos_token_id,
        do_sample=False, max_new_tokens=max_new_tokens,
    )
    save_policy(model, tokenizer, out_dir)
    return out_dir


def save_policy(model: Qwen2ForCausalLM, tokenizer, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    tokenizer.save_pretrained(out_dir)
