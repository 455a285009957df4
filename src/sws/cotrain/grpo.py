"""GRPO pieces shared by both co-trained policies: group advantages, whole-group trimming and the clipped loss.

The loss is TRL's GRPOTrainer loss at its defaults (`loss_type="dapo"`, `epsilon=0.2`, `beta=0`, token-level
importance sampling): the clipped surrogate summed over every completion token of the batch and divided by the
batch's completion-token count. A test checks value and gradient against TRL's own `_compute_loss`.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

ADVANTAGE_EPS = 1e-4  # TRL's constant in (r - mean) / (std + eps)


def group_advantages(rewards: Sequence[float], group_ids: Sequence[int]) -> list[float]:
    """Each reward minus its group's mean, over the group's unbiased std plus TRL's epsilon."""
    if len(rewards) != len(group_ids):
        raise ValueError("rewards and group_ids differ in length")
    values = torch.tensor(rewards, dtype=torch.float64)
    ids = list(group_ids)
    advantages = torch.zeros_like(values)
    for group in dict.fromkeys(ids):
        members = torch.tensor([i for i, g in enumerate(ids) if g == group])
        if len(members) < 2:
            raise ValueError(f"group {group!r} has {len(members)} member; GRPO needs at least 2 per group")
        group_values = values[members]
        if bool((group_values == group_values[0]).all()):
            continue  # exactly zero: a rounded mean would leave 1e-13 and cost the row a forward pass
        advantages[members] = (group_values - group_values.mean()) / (group_values.std() + ADVANTAGE_EPS)
    return advantages.tolist()


def trim_whole_groups(group_ids: Sequence[int], multiple_of: int) -> list[int]:
    """Indices of the rows kept when the batch must be a multiple of `multiple_of` rows: whole groups are
    dropped from the end until it is, so no group is ever split (SynCo's trimming cut groups in two)."""
    ids = list(group_ids)
    groups = list(dict.fromkeys(ids))
    sizes = {group: ids.count(group) for group in groups}
    while groups and sum(sizes[g] for g in groups) % multiple_of:
        groups.pop()
    kept = set(groups)
    return [i for i, group in enumerate(ids) if group in kept]


def clipped_surrogate_loss(per_token_logps: torch.Tensor, old_per_token_logps: torch.Tensor,
                           advantages: torch.Tensor, completion_mask: torch.Tensor,
                           epsilon_low: float = 0.2, epsilon_high: float = 0.2,
                           token_count: torch.Tensor | None = None) -> torch.Tensor:
    """TRL's default GRPO loss (dapo normalisation) over a (batch, tokens) block; `advantages` is (batch,).
    `token_count`, when given, is the normaliser in place of the block's own completion tokens: the count of a
    whole batch whose zero-advantage rows (zero loss, zero gradient) were left out of the block."""
    ratio = torch.exp(per_token_logps - old_per_token_logps)
    clipped = torch.clamp(ratio, 1 - epsilon_low, 1 + epsilon_high)
    per_sequence_advantage = advantages.unsqueeze(1)
    per_token_loss = -torch.min(ratio * per_sequence_advantage, clipped * per_sequence_advantage)
    mask = completion_mask.to(per_token_loss.dtype)
    normaliser = mask.sum() if token_count is None else token_count.to(mask.dtype)
    return (per_token_loss * mask).sum() / normaliser.clamp(min=1.0)


def completion_logps(model: torch.nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor,
                     completion_length: int, temperature: float = 1.0) -> torch.Tensor:
    """Log-probabilities of the last `completion_length` tokens of each row, with logits scaled by the
    sampling temperature as TRL does."""
    logits = model(input_ids=input_ids, attention_mask=attention_mask).logits
    logits = logits[:, -completion_length - 1:-1, :] / temperature
    targets = input_ids[:, -completion_length:]
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)


def shared_prompt_completion_logps(model: torch.nn.Module, prompt_ids: torch.Tensor, completion_ids: torch.Tensor,
                                   completion_mask: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """`completion_logps` for a batch whose rows share one prompt (the synthesizer's cards all answer the step's
    context): the prompt runs once, and its keys and values serve every row, so a long context costs one row's
    forward and backward instead of B. `prompt_ids` is (1, P), unpadded; completions are right-padded."""
    rows = completion_ids.shape[0]
    prompt = model(input_ids=prompt_ids, use_cache=True)
    cache = prompt.past_key_values
    cache.batch_repeat_interleave(rows)
    attention_mask = torch.cat([torch.ones(rows, prompt_ids.shape[1], dtype=completion_mask.dtype), completion_mask], 1)
    continued = model(input_ids=completion_ids, attention_mask=attention_mask, past_key_values=cache).logits
    # The prompt's last position predicts each completion's first token; completion position t predicts t + 1.
    logits = torch.cat([prompt.logits[:, -1:].expand(rows, 1, -1), continued[:, :-1]], 1) / temperature
    return torch.log_softmax(logits.float(), dim=-1).gather(-1, completion_ids.unsqueeze(-1)).squeeze(-1)
