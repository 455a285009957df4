"""How a TRL step is spread over devices and micro-batches, and whether one micro-batch can fit on a device.

A step trains on `batch_size × num_generations` completions. Each of `train.trl.num_processes` devices takes an
equal share, in micro-batches of `train.micro_batch_size` completions, one forward/backward pass each; gradient
accumulation adds up the passes (accumulation = completions / (micro-batch × devices)). Combinations that do
not divide are refused.

The fit check is a lower bound on one device's memory: the policy's weights, gradients and two AdamW states
(four copies of every parameter, in the model's dtype: TRL loads the checkpoint's dtype and the optimizer
keeps its states in the parameters' dtype), the reference model's weights when `train.beta` > 0, and one copy
of a micro-batch's logits over the completion tokens (TRL computes logits for those only: `logits_to_keep`).
Activations come on top, so a setup that passes may still run out of memory; one that fails cannot run. The
parameter count and vocabulary come from the model's `config.json` (the model is built on the meta device,
which allocates nothing); the memory is `train.trl.device_memory_gb`, else CUDA device 0's free memory. On a
CPU without that setting nothing is checked.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sws.config import TrainConfig
from sws.errors import UserError

GB = 1e9
# Weights, gradients, AdamW's first and second moments.
POLICY_COPIES = 4


@dataclass(frozen=True)
class DeviceBatch:
    micro_batch_size: int
    accumulation_steps: int


@dataclass(frozen=True)
class ModelSize:
    parameters: int
    vocab_size: int
    bytes_per_value: int


def device_batch(cfg: TrainConfig, config_file: Path) -> DeviceBatch:
    """Completions per pass and passes per step on each device; UserError when they do not divide the batch."""
    completions = cfg.batch_size * cfg.num_generations
    devices = cfg.trl.num_processes
    if completions % devices:
        raise UserError(f"{config_file}: field 'train.trl.num_processes' is {devices}, which does not divide the "
                        f"{completions} completions of a step (train.batch_size × train.num_generations); pick a "
                        "divisor")
    share = completions // devices
    micro = cfg.micro_batch_size or share
    if share % micro:
        raise UserError(f"{config_file}: field 'train.micro_batch_size' is {micro}, which does not divide the "
                        f"{share} completions each of {devices} device(s) takes per step (train.batch_size × "
                        "train.num_generations / train.trl.num_processes); pick a divisor")
    return DeviceBatch(micro, share // micro)


def device_memory(cfg: TrainConfig) -> float | None:
    """Bytes one device offers: the setting, else CUDA device 0's free memory; None on a CPU without the setting."""
    if cfg.trl.device_memory_gb is not None:
        return cfg.trl.device_memory_gb * GB
    import torch

    return float(torch.cuda.mem_get_info(0)[0]) if torch.cuda.is_available() else None


def model_size(model: Path | str) -> ModelSize:
    """Parameters, output vocabulary and bytes per value of the model `config.json` describes."""
    import torch
    from accelerate import init_empty_weights
    from transformers import AutoConfig, AutoModelForCausalLM

    config = AutoConfig.from_pretrained(str(model))
    with init_empty_weights():
        built = AutoModelForCausalLM.from_config(config)
    dtype = getattr(config, "dtype", None) or torch.float32
    dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
    return ModelSize(
        parameters=sum(parameter.numel() for parameter in built.parameters()),
        vocab_size=built.get_output_embeddings().weight.shape[0],
        bytes_per_value=torch.empty((), dtype=dtype).element_size(),
    )


def check_fit(cfg: TrainConfig, model: Path | str, batch: DeviceBatch, config_file: Path) -> None:
    """UserError naming the setting to lower when one micro-batch cannot fit on a device (see the module doc)."""
    memory = device_memory(cfg)
    if memory is None:
        return
    try:
        size = model_size(model)
    except (OSError, ValueError) as exc:
        raise UserError(f"{config_file}: field 'train.init_model': cannot read {model}'s config.json to check that "
                        f"it fits on a device ({str(exc).splitlines()[0]})") from None
    copies = POLICY_COPIES + (1 if cfg.beta > 0 else 0)
    model_bytes = copies * size.parameters * size.bytes_per_value
    per_completion = cfg.max_completion_length * size.vocab_size * size.bytes_per_value
    if model_bytes > memory:
        raise UserError(f"{config_file}: field 'train.init_model': {model} ({size.parameters / 1e9:.2f}B parameters) "
                        f"needs at least {model_bytes / GB:.1f} GB per device for weights, gradients and AdamW "
                        f"states, more than the {memory / GB:.1f} GB of device memory; pick a smaller model or set "
                        "train.trainer: verl (FSDP shards them over the GPUs)")
    logits = batch.micro_batch_size * per_completion
    if model_bytes + logits > memory:
        fits = int((memory - model_bytes) // per_completion)
        share = batch.micro_batch_size * batch.accumulation_steps
        divisor = max(size for size in range(1, fits + 1) if share % size == 0) if fits else 0
        fix = (f"lower train.micro_batch_size to {divisor} (the largest divisor of a device's {share} completions "
               f"that fits)" if fits else "lower train.max_completion_length (not even one completion fits)")
        raise UserError(f"{config_file}: field 'train.micro_batch_size': one micro-batch of "
                        f"{batch.micro_batch_size} completions × {cfg.max_completion_length} tokens needs at least "
                        f"{logits / GB:.1f} GB of logits besides {model_bytes / GB:.1f} GB for the model, more than "
                        f"the {memory / GB:.1f} GB of device memory; {fix}")


def require_gpus(cfg: TrainConfig, config_file: Path) -> None:
    """UserError unless as many CUDA GPUs are visible as `train.trl.num_processes` asks for."""
    import torch

    visible = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if visible < cfg.trl.num_processes:
        raise UserError(f"{config_file}: field 'train.trl.num_processes' is {cfg.trl.num_processes}, but "
                        f"{visible} CUDA GPU(s) are visible; lower it to {max(1, visible)}")
