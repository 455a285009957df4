"""The `oracle` engine: a RULE-BASED STAND-IN FOR TEACHER MODELS in the built-in arithmetic world.

It is not a language model. It reads each request's `task` and `fields` (the prompt template's inputs) and
answers from the arith world's rules (`sws.worlds.arith.teacher`), in the text formats real teacher models
produce, so the pipeline's prompt rendering and output parsing are exercised for real:

- `extract` {problem, k}: at most k concepts the problem's structure shows, never padded with its category's
  other concepts (JSON, numbered or bulleted, sometimes a preamble);
- `generate` {category, concepts, level, instance, [direction, source_problem]}: some planning, then a
  problem built to show the requested concepts under a `### Problem` line, or a refusal without one when no
  problem of the category shows them (instance k >= 1: another variant of the same request; direction
  easier / harder: a problem easier or harder than the source problem, on its concepts);
- `rate` {problem}: a short assessment ending in `Verdict: perfect|acceptable|bad`;
- `label` / `answer` {problem}: step-by-step work ending in `\\boxed{answer}`;
- `categorize` {problem, categories}: a one-sentence summary, the problem's category of the list, the end marker.

Noise, from `EngineConfig.options` (rates in [0, 1]): `ill_posed`, `multi_part`, `multiple_choice`, `proof`,
`true_false`, `answer_leak` (defects of generated problems, at most one per problem, so their sum is at most 1),
`judge_error` (a verdict is wrong), `labeler_error` (an answer is a plausible wrong integer), `categorizer_error`
(a category is another one of the list), `concept_error` (an extracted concept is missing or wrong, from a
random stream of its own); `seed` shifts every
draw. Each completion is deterministic given the seed, the request's seed and fields, and the sample index; at
temperature 0 all samples of a request are identical, as with a real model.

The failures of real small models, for end-to-end tests of the paths that handle them:
- `run_on` (rate): a generation goes on past its problem into a worked solution, wrong half the time;
- `cut_off` (rate): a completion stops halfway with finish_reason "length", as at max_tokens;
- `rubber_stamp` (rate): a verdict line with no analysis above it;
- `ignores_n` (true/false): one completion per request whatever its n, like llama.cpp's server.
These draws come from random streams of their own, so switching them on changes no other draw.

Tokens: no tokenizer stands behind a rule-based teacher, so a completion's tokens are the whitespace-separated
words of its text, and a request's prompt tokens (carried by its first completion) the words of its prompt or
of all its messages.
"""

from __future__ import annotations

import hashlib
import json
import random
from typing import Any

from sws.config import EngineConfig
from sws.engines.base import CUT_OFF, FINISHED, Completion, Engine, Request, billed_once, cut_at_stop
from sws.errors import UserError
from sws.worlds.arith import teacher
from sws.worlds.arith.truth import DEFECT_KINDS

FAILURE_RATES = ("run_on", "cut_off", "rubber_stamp")
NOISE_OPTIONS = (*DEFECT_KINDS, "judge_error", "labeler_error", "categorizer_error", "concept_error",
                 *FAILURE_RATES)
FLAGS = ("seed", "ignores_n")
TASKS = ("extract", "generate", "rate", "label", "answer", "categorize")


def _noise_rates(options: dict[str, Any]) -> dict[str, float]:
    rates = {}
    for key, value in options.items():
        if key in FLAGS:
            continue
        if key not in NOISE_OPTIONS:
            raise UserError(
                f"engine options: unknown oracle option '{key}'; use seed, ignores_n or a noise rate: "
                f"{', '.join(NOISE_OPTIONS)}"
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


def prompt_words(request: Request) -> int:
    """The oracle's prompt token count: whitespace-separated words of the prompt or of every message, as its
    completion tokens are the words of its text (no tokenizer stands behind a rule-based teacher)."""
    texts = [request.prompt] if request.prompt is not None else [message["content"] for message in request.messages]
    return sum(len(text.split()) for text in texts)


class OracleEngine(Engine):
    """Rule-based stand-in for teacher models (extractor, generator, judges, labeler) in the arith world."""

    name = "oracle"

    def __init__(self, cfg: EngineConfig) -> None:
        self.check_config(cfg)
        self.model = cfg.model
        self.rates = _noise_rates(cfg.options)
        self.seed = cfg.options.get("seed", 0)
        self.ignores_n = cfg.options.get("ignores_n", False)
        self.honours_n = not self.ignores_n

    @staticmethod
    def check_config(cfg: EngineConfig) -> None:
        _noise_rates(cfg.options)
        seed = cfg.options.get("seed", 0)
        if not isinstance(seed, int):
            raise UserError(f"engine options: oracle option 'seed' is {seed!r}; set an integer")
        if not isinstance(cfg.options.get("ignores_n", False), bool):
            raise UserError(f"engine options: oracle option 'ignores_n' is {cfg.options['ignores_n']!r}; "
                            "set true or false")

    def _rng(self, request: Request, sample_index: int, stream: str = "") -> random.Random:
        index = 0 if request.temperature == 0 else sample_index
        parts = [self.seed, request.seed or 0, index, request.task, request.fields, *([stream] if stream else [])]
        key = json.dumps(parts, sort_keys=True, default=str)
        return random.Random(int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big"))

    def _fails(self, failure: str, request: Request, sample_index: int) -> bool:
        rate = self.rates.get(failure, 0.0)
        return rate > 0 and self._rng(request, sample_index, failure).random() < rate

    def _field(self, request: Request, name: str) -> Any:
        if name not in request.fields:
            raise ValueError(f"oracle task '{request.task}' needs the field '{name}' in Request.fields")
        return request.fields[name]

    def _complete(self, request: Request, sample_index: int) -> str:
        rng = self._rng(request, sample_index)
        task = request.task
        if task == "extract":
            return teacher.extract_text(
                self._field(request, "problem"), int(self._field(request, "k")), rng,
                self.rates.get("concept_error", 0.0), self._rng(request, sample_index, "concept_error"),
            )
        if task == "generate":
            concepts = self._field(request, "concepts")
            run_on = self._rng(request, sample_index, "run_on_text") if self._fails("run_on", request, sample_index) else None
            return teacher.generate_text(
                self._field(request, "category"), list(concepts), self._field(request, "level"), self.rates, rng,
                run_on, (request.fields["direction"], request.fields["source_problem"]) if "direction" in request.fields
                else None,
            )
        if task == "rate":
            if self._fails("rubber_stamp", request, sample_index):
                return teacher.RUBBER_STAMP
            return teacher.rate_text(self._field(request, "problem"), self.rates.get("judge_error", 0.0), rng)
        if task == "categorize":
            return teacher.categorize_text(self._field(request, "problem"), list(self._field(request, "categories")),
                                           self.rates.get("categorizer_error", 0.0), rng)
        if task in ("label", "answer"):
            return teacher.label_text(self._field(request, "problem"), self.rates.get("labeler_error", 0.0), rng)
        raise UserError(
            f"oracle engine cannot play task '{task}'; it plays {', '.join(TASKS)} — "
            "give that role a real engine (vllm, openai, hf) in the pipeline YAML"
        )

    def generate(self, requests: list[Request]) -> list[list[Completion]]:
        return [billed_once([self._completion(request, index) for index in range(1 if self.ignores_n else request.n)],
                            prompt_words(request)) for request in requests]

    def _completion(self, request: Request, sample_index: int) -> Completion:
        text = self._complete(request, sample_index)
        finish_reason = FINISHED
        if self._fails("cut_off", request, sample_index):
            text, finish_reason = text[:len(text) // 2], CUT_OFF
        stopped = cut_at_stop(text, request.stop)
        if stopped is not None:  # as a server does: the reply ends before its first stop string
            text, finish_reason = stopped, FINISHED
        return Completion(text, len(text.split()), finish_reason)

    def close(self) -> None:
        """Nothing to release: the oracle holds no model, process or server."""
