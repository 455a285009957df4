"""The `hf` engine: transformers `generate` with sampling, batched with left padding; for small models and CPU.

Requests with the same sampling settings share batches of at most `batch_size` sequences (prompts × n), sorted
by length to keep padding short. Each batch is seeded from its requests' seeds, so the same requests give the
same completions. As with vLLM, a stop string ends a completion and is not part of its text, and only
temperature and top-p shape the sampling (transformers' default top-k of 50 is switched off).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sws import ui
from sws.config import EngineConfig
from sws.engines.base import (
    CUT_OFF,
    FINISHED,
    Completion,
    Engine,
    Request,
    billed_once,
    check_local_model,
    check_options,
    cut_at_stop,
    missing_chat_template,
    read_chat_template,
)

OPTIONS = {"batch_size", "chat_template", "device", "dtype"}


class HFEngine(Engine):
    name = "hf"
    honours_n = True

    def __init__(self, cfg: EngineConfig) -> None:
        self.check_config(cfg)
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.model = cfg.model
        self.batch_size = int(cfg.options.get("batch_size", 64))
        self.device = cfg.options.get("device", "cuda" if torch.cuda.is_available() else "cpu")
        self.chat_template = read_chat_template(cfg.options.get("chat_template"))
        self.tokenizer = AutoTokenizer.from_pretrained(cfg.model, padding_side="left")
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        dtype = getattr(torch, cfg.options["dtype"]) if "dtype" in cfg.options else "auto"
        self.lm = AutoModelForCausalLM.from_pretrained(cfg.model, dtype=dtype).to(self.device).eval()
        eos = self.lm.generation_config.eos_token_id
        eos = self.tokenizer.eos_token_id if eos is None else eos
        self.eos_ids = set(eos) if isinstance(eos, list) else {eos}

    @staticmethod
    def check_config(cfg: EngineConfig) -> None:
        check_options(cfg.options, OPTIONS, HFEngine.name)
        check_local_model(cfg.model, HFEngine.name)
        read_chat_template(cfg.options.get("chat_template"))

    def generate(self, requests: list[Request]) -> list[list[Completion]]:
        texts = [self._render(request) for request in requests]
        results: list[list[Completion]] = [[] for _ in requests]
        batches = list(self._batches(requests, texts))
        for batch in ui.track(batches, f"hf {self.model}", total=len(batches)):
            completions = self._generate_batch([requests[i] for i in batch], [texts[i] for i in batch])
            for index, per_request in zip(batch, completions, strict=True):
                results[index] = per_request
        return results

    def close(self) -> None:
        del self.lm

    def _render(self, request: Request) -> str:
        if request.prompt is not None:
            return request.prompt
        if self.chat_template is None and self.tokenizer.chat_template is None:
            raise missing_chat_template(self.model)
        return self.tokenizer.apply_chat_template(
            list(request.messages), chat_template=self.chat_template, tokenize=False, add_generation_prompt=True
        )

    def _batches(self, requests: list[Request], texts: list[str]) -> Iterator[list[int]]:
        """Indices of requests grouped by sampling settings, by length, into batches of <= batch_size sequences."""
        groups: dict[str, list[int]] = {}
        for index, request in enumerate(requests):
            settings = {**request.sampling(), "seed": None}
            groups.setdefault(json.dumps(settings, sort_keys=True), []).append(index)
        for indices in groups.values():
            indices.sort(key=lambda i: len(texts[i]))
            per_batch = max(1, self.batch_size // requests[indices[0]].n)
            for start in range(0, len(indices), per_batch):
                yield indices[start:start + per_batch]

    def _generate_batch(self, requests: list[Request], texts: list[str]) -> list[list[Completion]]:
        import torch

        first = requests[0]
        inputs = self.tokenizer(
            texts, return_tensors="pt", padding=True, add_special_tokens=first.prompt is not None
        ).to(self.device)
        sampling: dict[str, Any] = (
            {"do_sample": True, "temperature": first.temperature, "top_p": first.top_p, "top_k": 0}
            if first.temperature > 0 else {"do_sample": False}
        )
        stop = list(first.stop)
        with _seeded([request.seed for request in requests]), torch.inference_mode():
            output = self.lm.generate(
                **inputs, **sampling, max_new_tokens=first.max_tokens, num_return_sequences=first.n,
                pad_token_id=self.tokenizer.pad_token_id, stop_strings=stop or None,
                tokenizer=self.tokenizer if stop else None,
            )
        rows = output[:, inputs["input_ids"].shape[1]:].tolist()
        completions = [self._completion(row, stop, first.max_tokens) for row in rows]
        prompt_tokens = inputs["attention_mask"].sum(dim=1).tolist()
        return [billed_once(completions[i * first.n:(i + 1) * first.n], int(prompt_tokens[i]))
                for i in range(len(requests))]

    def _completion(self, row: list[int], stop: list[str], max_tokens: int) -> Completion:
        tokens = _generated_length(row, self.eos_ids, self.tokenizer.pad_token_id)
        text = self.tokenizer.decode(row[:tokens], skip_special_tokens=True)
        stopped = cut_at_stop(text, tuple(stop))
        ended = stopped is not None or any(token in self.eos_ids for token in row[:tokens]) or tokens < max_tokens
        return Completion(text if stopped is None else stopped, tokens, FINISHED if ended else CUT_OFF)


def _generated_length(row: list[int], eos_ids: set[int], pad_id: int) -> int:
    """Tokens the model produced: up to and including the first EOS, else up to the padding added after it stopped."""
    for position, token in enumerate(row):
        if token in eos_ids:
            return position + 1
    length = len(row)
    while length and row[length - 1] == pad_id:
        length -= 1
    return length


@contextmanager
def _seeded(seeds: list[int | None]) -> Iterator[None]:
    """Seed torch from the batch's request seeds without disturbing the caller's random state."""
    import torch

    if all(seed is None for seed in seeds):
        yield
        return
    digest = hashlib.sha256(json.dumps(seeds).encode()).digest()
    with torch.random.fork_rng():
        torch.manual_seed(int.from_bytes(digest[:8], "little"))
        yield
