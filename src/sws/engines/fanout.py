"""How an engine delivers `n` samples of a request: natively (one request with `n`) or by fan-out (n requests).

Some OpenAI-compatible servers (llama.cpp, Ollama, several hosted APIs) accept `n` but return one choice. The
engine option `n_mode` decides, for every engine alike:
- `native`: one request with `n`; a reply with fewer choices is a user error that names this option;
- `fanout`: `n` single-choice requests with seeds seed, seed + 1, … (one seed for all would give `n`
  identical samples and a consistency of 1.0);
- `auto` (default): native for an engine that declares `honours_n = True` (vllm, hf: they always return `n`);
  otherwise the first request with n > 1 goes alone, and if fewer than `n` choices come back, the engine fans
  out from then on and says so once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from sws import ui
from sws.engines.base import Completion, Engine, Request, in_request_order
from sws.errors import UserError
from sws.secrets import redact_completions

N_MODES = ("auto", "native", "fanout")
_SEED_MASK = 0x7FFFFFFF  # servers differ in the seed widths they accept; 31 bits fit all of them


def read_n_mode(options: dict[str, Any]) -> str:
    mode = options.get("n_mode", "auto")
    if mode not in N_MODES:
        raise UserError(f"engine option 'n_mode' is {mode!r} (field 'options' of the role); "
                        f"use one of: {', '.join(N_MODES)}")
    return mode


def fan_out(request: Request) -> list[Request]:
    """`request.n` single-sample requests with seeds seed, seed + 1, … (from 0 when the request has no seed)."""
    base = request.seed or 0
    return [dataclasses.replace(request, n=1, seed=(base + index) & _SEED_MASK) for index in range(request.n)]


class SampleFanOut(Engine):
    """Wraps an engine and gets every request's `n` samples in the way `n_mode` says."""

    def __init__(self, engine: Engine, mode: str) -> None:
        self.engine = engine
        self.name = engine.name
        self.model = engine.model
        self.configured = mode
        self.mode = "native" if mode == "auto" and engine.honours_n else mode

    def generate(self, requests: list[Request]) -> list[list[Completion]]:
        return in_request_order(self.generate_iter(requests), len(requests))

    def generate_iter(self, requests: list[Request]) -> Iterator[tuple[int, list[Completion]]]:
        for index, completions in self._samples(requests):
            yield index, redact_completions(completions)

    def _samples(self, requests: list[Request]) -> Iterator[tuple[int, list[Completion]]]:
        pending = list(range(len(requests)))
        probe = next((index for index in pending if requests[index].n > 1), None)
        if self.mode == "auto" and probe is not None:
            completions = self.engine.generate([requests[probe]])[0]
            if len(completions) < requests[probe].n:
                self.mode = "fanout"
                ui.info(f"{self.name} engine: the server returned {len(completions)} of n={requests[probe].n} "
                        "choices; sending n single-choice requests with distinct seeds instead "
                        "(engine option n_mode: fanout skips this check)")
            else:
                self.mode = "native"
                pending.remove(probe)
                yield probe, completions
        if self.mode == "fanout":
            yield from self._fanned_out(requests, pending)
            return
        for position, completions in self.engine.generate_iter([requests[index] for index in pending]):
            index = pending[position]
            if len(completions) < requests[index].n:
                raise self._too_few(len(completions), requests[index].n)
            yield index, completions

    def close(self) -> None:
        self.engine.close()

    def _too_few(self, returned: int, n: int) -> UserError:
        if self.configured == "native":
            return UserError(f"the {self.name} engine returned {returned} completions for n={n} (engine option "
                             "'n_mode' is native); set n_mode: fanout or auto in the role's options")
        # auto: the first reply had every choice, so the server honours n only at times.
        return UserError(f"the {self.name} engine returned {returned} completions for n={n}, after an earlier "
                         f"reply with all of them (engine option 'n_mode' is {self.configured}); set n_mode: fanout "
                         "in the role's options to ask one completion per request")

    def _fanned_out(self, requests: list[Request], pending: list[int]) -> Iterator[tuple[int, list[Completion]]]:
        singles = [(index, single) for index in pending for single in fan_out(requests[index])]
        gathered: dict[int, dict[int, Completion]] = {index: {} for index in pending}
        for position, completions in self.engine.generate_iter([single for _, single in singles]):
            index, single = singles[position]
            if not completions:
                raise UserError(f"the {self.name} engine returned no completion for a single-choice request "
                                "(engine option 'n_mode' is fanout); check the server")
            gathered[index][single.seed] = completions[0]
            if len(gathered[index]) == requests[index].n:
                by_seed = gathered.pop(index)
                yield index, [by_seed[request.seed] for request in fan_out(requests[index])]
