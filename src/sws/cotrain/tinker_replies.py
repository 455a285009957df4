"""The checks a Tinker server's replies pass before the learner uses them: each returns the part of the reply
the learner needs, or raises `MalformedReply` saying what is wrong. The client checks little of what it
decodes (a sample's tokens are any int32s, a forward pass's log-probabilities any floats of any length)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any


class MalformedReply(Exception):
    """A reply without the shape the Tinker API documents. `tokenizer`: the tokenizer may be what does not
    match the server's model."""

    def __init__(self, message: str, tokenizer: bool = False) -> None:
        super().__init__(message)
        self.tokenizer = tokenizer


def sampled_tokens(response: Any, n: int, vocabulary_size: int) -> list[list[int]]:
    """Each sample's token ids: `n` samples, each a list of ids in the tokenizer's vocabulary."""
    sequences = getattr(response, "sequences", None)
    if not isinstance(sequences, Sequence) or len(sequences) != n:
        count = len(sequences) if isinstance(sequences, Sequence) else "none"
        raise MalformedReply(f"{count} of the {n} samples asked for came back")
    samples = [getattr(sequence, "tokens", None) for sequence in sequences]
    for tokens in samples:
        if not isinstance(tokens, list) or not all(type(token) is int for token in tokens):
            raise MalformedReply("a sample's tokens are not a list of integer token ids")
        outside = [t for t in tokens if not 0 <= t < vocabulary_size]
        if outside:
            raise MalformedReply(f"a sample holds token id {outside[0]}, outside the tokenizer's vocabulary "
                                 f"of {vocabulary_size}", tokenizer=True)
    return samples


def forward_logprobs(result: Any, target_lengths: Sequence[int]) -> list[list[float]]:
    """A forward pass's log-probabilities: one finite value per target token of each datum sent."""
    outputs = getattr(result, "loss_fn_outputs", None)
    if not isinstance(outputs, Sequence) or len(outputs) != len(target_lengths):
        count = len(outputs) if isinstance(outputs, Sequence) else "none"
        raise MalformedReply(f"{count} of the {len(target_lengths)} sequences sent came back scored")
    logprobs = []
    for output, length in zip(outputs, target_lengths, strict=True):
        values = output.get("logprobs") if isinstance(output, Mapping) else None
        values = values.tolist() if hasattr(values, "tolist") else values
        if not isinstance(values, list):
            raise MalformedReply("a scored sequence has no logprobs")
        if len(values) != length:
            raise MalformedReply(f"a scored sequence has {len(values)} logprobs for its {length} tokens")
        if not all(_finite(value) for value in values):
            raise MalformedReply("a scored sequence has a logprob that is not a finite number")
        logprobs.append([float(value) for value in values])
    return logprobs


def loss_sum(result: Any) -> float:
    """The `loss:sum` metric of a forward-backward pass."""
    metrics = getattr(result, "metrics", None)
    value = metrics.get("loss:sum") if isinstance(metrics, Mapping) else None
    if not _finite(value):
        raise MalformedReply("its metrics have no finite loss:sum")
    return float(value)


def state_path(saved: Any) -> str:
    """Where the server saved a state: a non-empty path."""
    path = getattr(saved, "path", None)
    if not isinstance(path, str) or not path:
        raise MalformedReply("it named no path for the saved state")
    return path


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
