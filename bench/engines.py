"""Tokens per second of the vllm engine through sws against bare `vllm.LLM.generate` on the same prompts.

All paths use the one `vllm.LLM` the sws engine holds, in the same process, in rotating order, with the same
seeded SamplingParams (so they generate the same tokens): bare `LLM.generate`, the sws `VllmEngine`, and the
engine behind a fresh request cache (every request a miss, as in a pipeline's first run). The best of
`--rounds` rounds of each is compared; the printed ratio is sws / bare (goal >= 0.95).

    .venv/bin/python bench/engines.py [--model PATH] [--problems 256] [--n 8] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model folder (default: the warm-started arith policy)")
    parser.add_argument("--problems", type=int, default=256)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--max-tokens", type=int, default=24)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

    from sws import ui
    from sws.config import EngineConfig
    from sws.engines import CachedEngine, Request
    from sws.engines.cache import cache_identity
    from sws.engines.vllm import VllmEngine, sampling_params
    from sws.world import get_world
    from sws.worlds.arith import generate_problems
    from sws.worlds.arith.bootstrap import bootstrap_policy

    ui.set_quiet(True)  # no progress bars on either side
    cfg = EngineConfig(engine="vllm", model=str(args.model or bootstrap_policy()),
                       options={"enforce_eager": True, "max_model_len": 128})
    engine = VllmEngine(cfg)
    problems = generate_problems(args.problems, seed=0)
    requests = [Request(**get_world("arith").policy_prompt(p.problem), n=args.n, temperature=1.0, max_tokens=args.max_tokens,
                        seed=1000 * i) for i, p in enumerate(problems)]
    prompts = [request.prompt for request in requests]

    def bare() -> int:
        outputs = engine.llm.generate(prompts, [sampling_params(r) for r in requests], use_tqdm=False)
        return sum(len(sample.token_ids) for output in outputs for sample in output.outputs)

    def through_sws() -> int:
        return sum(c.tokens for completions in engine.generate(requests) for c in completions)

    def through_sws_and_cache() -> int:
        with tempfile.TemporaryDirectory() as folder:
            cached = CachedEngine(engine, Path(folder) / "requests.sqlite", cache_identity(cfg))
            return sum(c.tokens for completions in cached.generate(requests) for c in completions)

    paths: dict[str, Callable[[], int]] = {
        "bare vllm.LLM.generate": bare, "sws vllm engine": through_sws, "sws engine + cache": through_sws_and_cache,
    }
    engine.generate(requests[:16])  # warm-up
    best: dict[str, float] = dict.fromkeys(paths, 0.0)
    for round_index in range(args.rounds):
        names = list(paths)
        for name in names[round_index % len(names):] + names[:round_index % len(names)]:
            started = time.perf_counter()
            tokens = paths[name]()
            rate = tokens / (time.perf_counter() - started)
            best[name] = max(best[name], rate)
            print(f"round {round_index + 1}  {name:24s} {tokens:7d} tokens  {rate:9.0f} tok/s")
    engine.close()

    baseline = best["bare vllm.LLM.generate"]
    print(f"\n{len(requests)} prompts x n={args.n}, max_tokens={args.max_tokens}; best of {args.rounds} rounds")
    for name in paths:
        print(f"{name:24s} {best[name]:9.0f} tok/s   ratio vs bare: {best[name] / baseline:.3f}")


if __name__ == "__main__":
    main()
