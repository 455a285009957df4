"""The `oracle` engine: a RULE-BASED STAND-IN FOR TEACHER MODELS in the built-in arithmetic world.

It is not a language model. It reads each request's `task` and `fields` (the prompt template's inputs) and
answers from the arith world's rules (`sws.worlds.arith.teacher`), in the text formats real teacher models
produce, so the pipeline's prompt rendering and output parsing are exercised for real:

- `extract` {problem, category, k}: a list of k concepts (JSON, numbered or bulleted, sometimes a preamble);
- `generate` {category, concepts, level}: some planning, then the problem under a `### Problem` line;
- `rate` {problem}: a short assessment ending in `Verdict: perfect|acceptable|bad`;
- `label` / `answer` {problem}: step-by-step work ending in `\\boxed{answer}`.

Noise, from `EngineConfig.options` (rates in [0, 1]): `ill_posed`, `multi_part`, `multiple_choice`, `proof`,
`true_false`, `answer_leak` (defects of generated problems, at most one per problem, so their sum is at most 1),
`judge_error` (a verdict is wrong), `labeler_error` (an answer is a plausible wrong integer); `seed` shifts every
draw. Each completion is deterministic given the seed, the request's seed and fields, and the sample index; at
temperature 0 all samples of a request are identical, as with a real model.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from sws.config import EngineConfig
from sws.engines.base import Completion, Request
from sws.errors import UserError
from sws.worlds.arith import teacher
from sws.worlds.arith.truth import DEFECT_KINDS

NOISE_OPTIONS = (*DEFECT_KINDS, "judge_error", "labeler_error")
TASKS = ("extract", "generate", "rate", "label", "answer")


def _noise_rates(options: dict[str, Any]) -> dict[str, float]:
    rates = {}
    for key, value in options.items():
        if key == "seed":
            continue
        if key not in NOISE_OPTIONS:
            raise UserError(
                f"engine options: unknown oracle option '{key}'; use seed or a noise rate: {', '.join(NOISE_OPTIONS)}"
            )
        if not isinstance(value, int | float) or not 0.0 <= float(value) <= 1.0:
            raise UserError(f"engine options: oracle option '{key}' is {value!r}; set a rate between 0 and 1")
        rates[key] = float(value)
    defect_total = sum(rates.get(kind, 0.0) for kind in DEFECT_KINDS)
    if defect_total > 1.0:
        raise UserError(
            f"engine options: oracle defect rates ({', '.join(DEFECT_KINDS)}) sum to {defect_total:.2f}; "
            "a problem has at most one defect, so keep their sum at most 1"
        )
    return rates


class OracleEngine:
    """Rule-based stand-in for teacher models (extractor, generator, judges, labeler) in the arith world."""

    name = "oracle"

    def __init__(self, cfg: EngineConfig) -> None:
        self.model = cfg.model
        self.rates = _noise_rates(cfg.options)
        seed = cfg.options.get("seed", 0)
        if not isinstance(seed, int):
            raise UserError(f"engine options: oracle option 'seed' is {seed!r}; set an integer")
        self.seed = seed

    def _rng(self, request: Request, sample_index: int) -> random.Random:
        index = 0 if request.temperature == 0 else sample_index
        key = json.dumps([self.seed, request.seed or 0, index, request.task, request.fields],
                         sort_keys=True, default=str)
        return random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))

    def _field(self, request: Request, name: str) -> Any:
        if name not in request.fields:
            raise ValueError(f"oracle task '{request.task}' needs the field '{name}' in Request.fields")
        return request.fields[name]

    def _complete(self, request: Request, sample_index: int) -> str:
        rng = self._rng(request, sample_index)
        task = request.task
        if task == "extract":
            return teacher.extract_text(
                self._field(request, "problem"), self._field(request, "category"), int(self._field(request, "k")),
                rng,
            )
        if task == "generate":
            concepts = self._field(request, "concepts")
            return teacher.generate_text(
                self._field(request, "category"), list(concepts), self._field(request, "level"), self.rates, rng,
            )
        if task == "rate":
            return teacher.rate_text(self._field(request, "problem"), self.rates.get("judge_error", 0.0), rng)
        if task in ("label", "answer"):
            return teacher.label_text(self._field(request, "problem"), self.rates.get("labeler_error", 0.0), rng)
        raise UserError(
            f"oracle engine cannot play task '{task}'; it plays {', '.join(TASKS)} — "
            "give that role a real engine (vllm, openai, hf) in the pipeline YAML"
        )

    def generate(self, requests: list[Request]) -> list[list[Completion]]:
        results = []
        for request in requests:
            texts = [self._complete(request, index) for index in range(request.n)]
            # A whitespace word count stands in for the token count a tokenizer would report.
            results.append([Completion(text, tokens=len(text.split())) for text in texts])
        return results

    def close(self) -> None:
        """Nothing to release: the oracle holds no model, process or server."""
