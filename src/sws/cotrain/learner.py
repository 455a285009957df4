"""The protocol the co-training loop drives for each of its two policies, and its local torch implementation.

The protocol is the four calls a remote trainer offers (a Tinker-style server, a verl worker group): sample,
forward-backward on scored completions, optimizer step, weight sync; plus save and load of the whole state for
resume. The loop never touches a model otherwise, so the CPU and a GPU backend run the same algorithm.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from sws.cotrain.grpo import clipped_surrogate_loss, completion_logps, shared_prompt_completion_logps

OPTIMIZER_FILE = "optimizer.pt"


@dataclass(frozen=True)
class SamplingSettings:
    """Per-role sampling: each policy has its own, and they reach the model (SynCo's never did)."""
    temperature: float = 1.0
    max_new_tokens: int = 16
    system_prompt: str = ""


@dataclass(frozen=True)
class Completion:
    prompt: str  # as given to `sample`, before the system prompt
    text: str
    tokens: int = 0  # tokens the policy generated for it (0: none generated, a seed card)


@dataclass(frozen=True)
class ScoredCompletion:
    completion: Completion
    advantage: float


class Learner(Protocol):
    def sample(self, prompts: Sequence[str], n: int, settings: SamplingSettings) -> list[list[Completion]]:
        """`n` completions per prompt, in prompt order."""
        ...

    def forward_backward(self, batch: Sequence[ScoredCompletion], settings: SamplingSettings) -> float:
        """Accumulate the GRPO loss gradient of `batch`; returns the loss value."""
        ...

    def optim_step(self) -> None: ...

    def sync_weights(self) -> None:
        """Make the sampler see the weights of the last optimizer step."""
        ...

    def save(self, folder: Path) -> None: ...

    def load(self, folder: Path) -> None: ...

    def close(self, succeeded: bool) -> None:
        """Release what the policy holds outside this object (a server session); called once, when the arm ends."""
        ...


class TorchLearner:
    """A Hugging Face causal LM trained in this process: sampling and training share the weights, so
    `sync_weights` has nothing to do."""

    def __init__(self, folder: Path, learning_rate: float, seed: int = 0) -> None:
        torch.manual_seed(seed)
        self.tokenizer = AutoTokenizer.from_pretrained(folder)
        self.tokenizer.padding_side = "left"
        self.model = AutoModelForCausalLM.from_pretrained(folder)
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=learning_rate, weight_decay=0.0)

    def _with_system(self, prompt: str, settings: SamplingSettings) -> str:
        return settings.system_prompt + prompt

    @torch.no_grad()
    def sample(self, prompts: Sequence[str], n: int, settings: SamplingSettings) -> list[list[Completion]]:
        self.model.eval()
        texts = [self._with_system(prompt, settings) for prompt in prompts]
        encoded = self.tokenizer(texts, return_tensors="pt", padding=True, add_special_tokens=False)
        output = self.model.generate(
            **encoded, do_sample=True, temperature=settings.temperature, num_return_sequences=n,
            max_new_tokens=settings.max_new_tokens, pad_token_id=self.tokenizer.pad_token_id,
            eos_token_id=self.tokenizer.eos_token_id,
        )
        generated = output[:, encoded["input_ids"].shape[1]:]
        decoded = self.tokenizer.batch_decode(generated, skip_special_tokens=True)
        lengths = (generated != self.tokenizer.pad_token_id).sum(dim=1).tolist()
        return [[Completion(prompt, decoded[i * n + j], lengths[i * n + j]) for j in range(n)]
                for i, prompt in enumerate(prompts)]

    def encode_batch(self, batch: Sequence[ScoredCompletion], settings: SamplingSettings
                     ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Left-padded prompts then right-padded completions ending in EOS, as TRL lays them out:
        (prompt ids, prompt mask, completion ids, completion mask)."""
        tokenizer = self.tokenizer
        prompts = [tokenizer(self._with_system(item.completion.prompt, settings), add_special_tokens=False)
                   ["input_ids"] for item in batch]
        completions = [tokenizer(item.completion.text, add_special_tokens=False)["input_ids"]
                       + [tokenizer.eos_token_id] for item in batch]
        prompt_width, completion_width = max(map(len, prompts)), max(map(len, completions))
        prompt_ids = torch.full((len(batch), prompt_width), tokenizer.pad_token_id)
        prompt_mask = torch.zeros((len(batch), prompt_width), dtype=torch.long)
        completion_ids = torch.full((len(batch), completion_width), tokenizer.pad_token_id)
        completion_mask = torch.zeros((len(batch), completion_width), dtype=torch.long)
        for row, (prompt, completion) in enumerate(zip(prompts, completions, strict=True)):
            prompt_ids[row, prompt_width - len(prompt):] = torch.tensor(prompt)
            prompt_mask[row, prompt_width - len(prompt):] = 1
            completion_ids[row, :len(completion)] = torch.tensor(completion)
            completion_mask[row, :len(completion)] = 1
        return prompt_ids, prompt_mask, completion_ids, completion_mask

    def forward_backward(self, batch: Sequence[ScoredCompletion], settings: SamplingSettings) -> float:
        """Rows with a zero advantage add nothing to the loss or its gradient but their tokens to the
        normaliser, so only the others run through the model (most of a step's groups are all right or all
        wrong); a batch of zero advantages leaves zero gradients, as the full pass would."""
        if not batch:
            return 0.0
        self.model.train()
        prompt_ids, prompt_mask, completion_ids, completion_mask = self.encode_batch(batch, settings)
        token_count = completion_mask.sum()
        rows = [row for row, item in enumerate(batch) if item.advantage != 0]
        if not rows:
            for parameter in self.model.parameters():
                if parameter.grad is None:
                    parameter.grad = torch.zeros_like(parameter)
            return 0.0
        completion_mask = completion_mask[rows]
        completion_ids = completion_ids[rows, :int(completion_mask.sum(1).max())]
        completion_mask = completion_mask[:, :completion_ids.shape[1]]
        prompt_ids, prompt_mask = prompt_ids[rows], prompt_mask[rows]
        prompt_ids, prompt_mask = prompt_ids[:, prompt_mask.any(0)], prompt_mask[:, prompt_mask.any(0)]
        if len({item.completion.prompt for item in batch}) == 1:
            logps = shared_prompt_completion_logps(self.model, prompt_ids[:1, prompt_mask[0].bool()], completion_ids,
                                                   completion_mask, settings.temperature)
        else:
            logps = completion_logps(self.model, torch.cat([prompt_ids, completion_ids], 1),
                                     torch.cat([prompt_mask, completion_mask], 1), completion_ids.shape[1],
                                     settings.temperature)
        advantages = torch.tensor([batch[row].advantage for row in rows], dtype=logps.dtype)
        # one optimisation pass per batch of samples: the old policy is the current one (TRL's num_iterations=1)
        loss = clipped_surrogate_loss(logps, logps.detach(), advantages, completion_mask, token_count=token_count)
        loss.backward()
        return float(loss.detach())

    def optim_step(self) -> None:
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)

    def sync_weights(self) -> None:
        return None

    def save(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        self.model.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)
        torch.save(self.optimizer.state_dict(), folder / OPTIMIZER_FILE)

    def load(self, folder: Path) -> None:
        self.model.load_state_dict(AutoModelForCausalLM.from_pretrained(folder).state_dict())
        optimizer_file = folder / OPTIMIZER_FILE
        if optimizer_file.exists():
            self.optimizer.load_state_dict(torch.load(optimizer_file, weights_only=True))

    def close(self, succeeded: bool) -> None:
        return None
