"""The Ray executor against the local one on this machine's cores, in one process run:

1. Overhead: the arith demo's synthesis (the demo preset: budget 4000, 8 label samples, oracle teachers) and
   its filter (8 rollouts of the demo's hf policy; the warm-started one, since the GRPO-trained one needs a
   training run), seconds with `executor.kind: local` and `ray` (one replica per core); goal ray/local <= 1.2.
2. Scale: 1x, 10x and 100x the demo's labeling requests (8 oracle samples each) streamed through the Ray
   executor: completions per second per core (goal: within 20 % of 1x) and the driver's peak resident memory
   while it streams them, against its resident memory before (goal: flat).

The Ray cluster (`ray.init(num_cpus=cores)`) starts once, before any timing; its start-up is printed apart.

    .venv/bin/python bench/ray_executor.py [--budget 4000] [--scales 1,10,100] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import polars as pl
from rich.console import Console
from rich.table import Table

from sws import ui
from sws.config import PipelineConfig, load_config
from sws.llm_calls import request_seed, role_request, shared_engines
from sws.presets import PRESET_DIR
from sws.stages import filter as filter_stage
from sws.stages import identify, synthesize
from sws.tables import read_table, write_table
from sws.worlds.arith import generate_problems

PIPELINE = PRESET_DIR / "demo.yaml"
ROLES = ("extractor", "generator", "judges", "labeler", "policy")


def identified_run(cfg: PipelineConfig, run_dir: Path) -> None:
    """problems and rollouts of the demo's seed set in which the medium problems fail, then `sws identify`."""
    arith = generate_problems(cfg.arith.n_seed_problems, seed=cfg.seed, levels=cfg.arith.seed_levels)
    ids = [f"p{index}" for index in range(len(arith))]
    write_table(run_dir, "problems", pl.DataFrame({
        "problem_id": ids, "problem": [p.problem for p in arith], "answer": [p.answer for p in arith],
        "category": [p.category for p in arith], "source": ["arith"] * len(arith)}))
    write_table(run_dir, "rollouts", pl.DataFrame({
        "step": [step for _ in arith for step in (1, 2)], "problem_id": [i for i in ids for _ in (1, 2)],
        "n": [8] * (2 * len(arith)),
        "n_correct": [c for p in arith for c in ((2, 1) if p.level == "medium" else (7, 8))]}))
    identify.run(cfg, run_dir)


def with_executor(cfg: PipelineConfig, kind: str) -> PipelineConfig:
    from sws.worlds.arith.bootstrap import bootstrap_policy

    settings = cfg.model_dump(mode="json")
    settings["roles"]["policy"]["model"] = str(bootstrap_policy())
    settings["executor"] = {"kind": kind, "roles": {role: {"replicas": os.cpu_count()} for role in ROLES}}
    return PipelineConfig.model_validate(settings)


def overhead(cfg: PipelineConfig, base: Path) -> Table:
    seconds: dict[tuple[str, str], float] = {}
    for kind in ("local", "ray"):
        run_dir = base / kind
        identified_run(cfg, run_dir)
        step_cfg = with_executor(cfg, kind)
        for name, step in (("synthesis", synthesize.run), ("filter", filter_stage.run)):
            started = time.perf_counter()
            step(step_cfg, run_dir)
            seconds[name, kind] = time.perf_counter() - started
    same = all(read_table(base / "local", name).equals(read_table(base / "ray", name)) for name in ("labeled", "filtered"))
    table = Table(title=f"executor overhead on {os.cpu_count()} cores (labeled and filtered identical: {same})")
    for column in ("step", "local s", "ray s", "ray / local"):
        table.add_column(column, justify="right")
    for name in ("synthesis", "filter"):
        local, ray = seconds[name, "local"], seconds[name, "ray"]
        table.add_row(name, f"{local:.1f}", f"{ray:.1f}", f"{ray / local:.2f}x")
    return table


def labeling_requests(cfg: PipelineConfig, rated: pl.DataFrame, copies: int, tag: str):
    """The label step's requests for `rated`, `copies` times over (each copy, and each tag, its own seeds), one
    at a time."""
    role = cfg.roles.labeler
    for copy in range(copies):
        for syn_id, problem in rated.select("syn_id", "problem").iter_rows():
            yield role_request(role, task="label", fields={"problem": problem}, text=problem,
                               n=cfg.synthesize.label_samples,
                               seed=request_seed(cfg.seed, "bench", tag, syn_id, str(copy)))


def resident_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def peak_resident_mib(work: Callable[[], int]) -> tuple[int, float]:
    """What `work` returns, and the driver's highest resident memory while it ran (sampled every 20 ms)."""
    peak = resident_mib()
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(0.02):
            peak = max(peak, resident_mib())

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        return work(), peak
    finally:
        done.set()
        sampler.join()


def scale(cfg: PipelineConfig, base: Path, scales: list[int], repeats: int) -> Table:
    """Every scale through one executor in one `shared_engines()` block, as a step's calls go: the workers start
    once, in a warm-up call whose time is printed apart from the table. Each scale runs `repeats` times (new
    seeds each time, so nothing is already done) and the table shows the run of median time."""
    from sws.executors.ray_executor import RayExecutor

    rated = read_table(base / "ray", "rated")
    table = Table(title=f"labeling through Ray, 1x = {rated.height} requests x {cfg.synthesize.label_samples} "
                        f"samples, median of {repeats}")
    for column in ("scale", "completions", "seconds", "per core /s", "vs 1x", "driver MiB before", "peak while"):
        table.add_column(column, justify="right")
    executor = RayExecutor(with_executor(cfg, "ray"), base / "scale")

    def label(factor: int, tag: str) -> int:
        answers = executor.stream("labeler", cfg.roles.labeler, labeling_requests(cfg, rated, factor, tag),
                                  cfg.synthesize.shard_size, f"label x{factor}")
        return sum(len(samples) for samples in answers)

    first_rate = None
    with shared_engines():
        started = time.perf_counter()
        label(1, "warm-up")
        Console().print(f"workers' start and a 1x warm-up: {time.perf_counter() - started:.1f} s (not in the table)")
        for factor in scales:
            runs = []
            for repeat in range(repeats):
                before = resident_mib()
                started = time.perf_counter()
                completions, peak = peak_resident_mib(lambda factor=factor, repeat=repeat: label(factor, f"x{factor}/{repeat}"))
                runs.append((time.perf_counter() - started, completions, before, peak))
            seconds, completions, before, peak = sorted(runs)[len(runs) // 2]
            rate = completions / seconds / os.cpu_count()
            first_rate = first_rate or rate
            table.add_row(f"{factor}x", str(completions), f"{seconds:.1f}", f"{rate:.0f}", f"{rate / first_rate:.2f}",
                          f"{before:.0f}", f"{peak:.0f}")
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=int, help="concept sets to synthesize (default: the demo's)")
    parser.add_argument("--scales", default="1,10,100", help="comma-separated multiples of the labeling requests")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each scale; the median is shown")
    args = parser.parse_args()
    import ray

    ui.set_quiet(True)
    cfg = load_config(PIPELINE)
    if args.budget:
        cfg.synthesize.budget = args.budget
    started = time.perf_counter()
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    console = Console()
    console.print(f"Ray cluster start: {time.perf_counter() - started:.1f} s (not in the timings below)")
    with tempfile.TemporaryDirectory() as tmp:
        console.print(overhead(cfg, Path(tmp)))
        console.print(scale(cfg, Path(tmp), [int(factor) for factor in args.scales.split(",")], args.repeats))
    ray.shutdown()


if __name__ == "__main__":
    main()
