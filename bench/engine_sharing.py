"""Engine loads and seconds of the four teacher steps when every role is the same in-process vLLM model:
one engine per step (as before `shared_engines`) against one engine for the whole `sws synthesize` run.

Each step sends its own requests through `sws.llm_calls.engine_for`, as extract, generate, rate and label do,
to a fresh request cache (every request a miss). Prints loads and seconds of both and their ratio.

    .venv/bin/python bench/engine_sharing.py [--model PATH] [--requests 16]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

STEPS = ("extract", "generate", "rate", "label")
CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }}\n{% endfor %}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", help="model folder (default: the warm-started arith policy)")
    parser.add_argument("--requests", type=int, default=16)
    args = parser.parse_args()
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")

    from sws import ui
    from sws.config import EngineConfig
    from sws.engines import Request, vllm
    from sws.llm_calls import engine_for, shared_engines
    from sws.worlds.arith.bootstrap import bootstrap_policy

    ui.set_quiet(True)
    model = args.model or str(bootstrap_policy())
    role = EngineConfig(engine="vllm", model=model, max_tokens=16,
                        options={"enforce_eager": True, "max_model_len": 128, "chat_template": CHAT_TEMPLATE})
    loads: list[float] = []
    real_init = vllm.VllmEngine.__init__

    def timed_init(self, cfg) -> None:
        started = time.perf_counter()
        real_init(self, cfg)
        loads.append(time.perf_counter() - started)

    vllm.VllmEngine.__init__ = timed_init

    def run_steps(run_dir: Path) -> None:
        for step in STEPS:
            requests = [Request(messages=({"role": "user", "content": f"{step} {i}: Compute {i}+{i}."},), n=2,
                                temperature=1.0, max_tokens=16, seed=i) for i in range(args.requests)]
            with engine_for(role, run_dir) as engine:
                engine.generate(requests)

    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("one engine per step", "one engine per run"):
            loads.clear()
            started = time.perf_counter()
            if name == "one engine per run":
                with shared_engines():
                    run_steps(Path(tmp) / "shared")
            else:
                run_steps(Path(tmp) / "per_step")
            results[name] = (len(loads), sum(loads), time.perf_counter() - started)
    for name, (count, load_s, total_s) in results.items():
        print(f"{name:<20} engine loads {count}  load time {load_s:6.1f} s  four steps {total_s:6.1f} s")
    before, after = results["one engine per step"][2], results["one engine per run"][2]
    print(f"one engine per run / one per step: {after / before:.2f} of the time")


if __name__ == "__main__":
    main()
