"""`sws select` on a pool of up to a million short problems: the streamed selection (`sws.stages.select.select`,
the pool embedded `POOL_CHUNK` rows at a time) against a plain NumPy brute force that holds every pool embedding
at once, on the same data.

A third line runs the whole `sws select` stage on a run directory (pool read from Parquet through prepare's
reader, checked against the seed set, written with its rejected sidecar), for what a user's command costs.

Each method runs in a process of its own, which builds the same pool (short problems in 7 categories) and weak set,
then selects `--budget` problems; the process reports its wall time and its peak resident memory above what it
held once the pool was built. Embeddings are a cheap deterministic function of each problem's number (384
dimensions, L2-normalised), so the bench measures selection, not the embedding model; with the real model the pool
is embedded in the same chunks. Both methods must select the same problems (but ties at a quota's edge, which differently blocked matrix products
may round apart), which the script checks.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import numpy as np
import polars as pl

from sws.budget import largest_remainder
from sws.stages import select as stage

CATEGORIES = ("Algebra", "Counting & Probability", "Geometry", "Intermediate Algebra", "Number Theory",
              "Prealgebra", "Precalculus")
DIM = 384
WEAK_PER_CATEGORY = 300


def vectors_of(numbers: np.ndarray) -> np.ndarray:
    """The stand-in embedding of problem `number`: a fixed smooth function of it, L2-normalised."""
    rng = np.random.default_rng(0)
    frequencies, phases = rng.uniform(1e-6, 1e-2, DIM), rng.uniform(0, 2 * np.pi, DIM)
    vectors = np.sin(np.outer(numbers.astype(np.float32), frequencies.astype(np.float32)) + phases.astype(np.float32))
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def numbers_in(texts: list[str]) -> np.ndarray:
    return np.fromiter((int(text.split(" ", 2)[1]) for text in texts), dtype=np.int64, count=len(texts))


def embed_weak(texts: list[str]) -> np.ndarray:
    return vectors_of(numbers_in(texts))


def embed_pool_in_chunks(texts: list[str]):
    for start in range(0, len(texts), stage.POOL_CHUNK):
        yield vectors_of(numbers_in(texts[start:start + stage.POOL_CHUNK]))


def build(n_pool: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    rng = np.random.default_rng(1)
    numbers = np.arange(n_pool, dtype=np.int64) * 7 + 3
    pool = pl.DataFrame({"number": numbers, "category": rng.choice(CATEGORIES, n_pool)}).select(
        problem_id=pl.format("pool-{}", "number"), problem=pl.format("Problem {} asks for x + {}.", "number", "number"),
        answer=pl.lit("1"), category="category", source=pl.lit("sel/bench"))
    weak_numbers = rng.integers(0, 7 * n_pool, WEAK_PER_CATEGORY * len(CATEGORIES))
    weak = pl.DataFrame({"number": weak_numbers, "category": np.repeat(CATEGORIES, WEAK_PER_CATEGORY)}).select(
        problem_id=pl.format("weak-{}", pl.int_range(pl.len())), problem=pl.format("Problem {} weak.", "number"),
        category="category")
    return pool, weak


def streamed(pool: pl.DataFrame, weak: pl.DataFrame, budgets: dict[str, int]) -> list[str]:
    selected, _ = stage.select(pool, weak, budgets, embed_weak, embed_pool_in_chunks)
    return selected["problem_id"].to_list()


def brute_force(pool: pl.DataFrame, weak: pl.DataFrame, budgets: dict[str, int]) -> list[str]:
    """Every pool embedding in one matrix, then per category the full similarity matrix and a sort."""
    matrix = vectors_of(numbers_in(pool["problem"].to_list()))
    pool_categories = pool["category"].to_numpy()
    weak_categories = weak["category"].to_numpy()
    weak_matrix = embed_weak(weak["problem"].to_list())
    ids = pool["problem_id"].to_numpy()
    chosen = []
    for category, quota in budgets.items():
        rows = np.flatnonzero(pool_categories == category)
        similarity = matrix[rows] @ weak_matrix[weak_categories == category].T
        distances = 1.0 - similarity.max(axis=1)
        chosen += ids[rows[np.argsort(distances, kind="stable")[:quota]]].tolist()
    return chosen


def whole_stage(pool: pl.DataFrame, weak: pl.DataFrame, budgets: dict[str, int]) -> list[str]:
    """`sws select` itself on a run directory: the pool read from Parquet through prepare's reader, checked against
    the seed set, selected and written with its rejected sidecar (the stand-in embedder in place of the model)."""
    import tempfile
    from pathlib import Path

    from sws.config import PipelineConfig
    from sws.tables import read_table, write_table

    stage.embed_texts = lambda texts, embedder, run_dir: embed_weak(texts)
    stage.embed_in_chunks = lambda texts, embedder, cache_dir, chunk_size: embed_pool_in_chunks(texts)
    with tempfile.TemporaryDirectory() as folder:
        run_dir, pool_path = Path(folder) / "run", Path(folder) / "pool.parquet"
        pool.drop("source").write_parquet(pool_path)
        problems = weak.with_columns(answer=pl.lit("1"), source=pl.lit("seed"))
        write_table(run_dir, "problems", problems.select("problem_id", "problem", "answer", "category", "source"))
        write_table(run_dir, "weakness", problems.select(
            "problem_id", "category", accs=pl.lit([0.0]), n_record=pl.lit(2, dtype=pl.Int64), max_acc=pl.lit(0.0),
            slope=pl.lit(0.0), weak=pl.lit(True)))
        total = sum(budgets.values())
        write_table(run_dir, "categories", pl.DataFrame({
            "category": list(budgets), "n_problems": [WEAK_PER_CATEGORY] * len(budgets),
            "n_weak": [WEAK_PER_CATEGORY] * len(budgets), "fail_ratio": [1.0] * len(budgets),
            "share": [quota / total for quota in budgets.values()]}))
        stage.run(PipelineConfig.model_validate({"select": {"pool": str(pool_path), "budget": total}}), run_dir)
        return read_table(run_dir, "selected")["problem_id"].to_list()


def rss_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize()


def child(method: str, n_pool: int, budget: int) -> None:
    pool, weak = build(n_pool)
    budgets = largest_remainder({category: 1.0 + index for index, category in enumerate(CATEGORIES)}, budget)
    before = rss_bytes()
    started = time.perf_counter()
    chosen = {"streamed": streamed, "brute": brute_force, "stage": whole_stage}[method](pool, weak, budgets)
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps({"seconds": seconds, "extra_peak": max(peak - before, 0), "chosen": sorted(chosen)}))


def measure(method: str, n_pool: int, budget: int) -> dict:
    output = subprocess.run([sys.executable, __file__, "--child", method, "--pool", str(n_pool),
                             "--budget", str(budget)], capture_output=True, text=True, check=True).stdout
    return json.loads(output.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[250_000, 1_000_000])
    parser.add_argument("--pool", type=int, default=0)
    parser.add_argument("--budget", type=int, default=1000)
    parser.add_argument("--child", choices=["streamed", "brute", "stage"])
    args = parser.parse_args()
    if args.child:
        child(args.child, args.pool, args.budget)
        return
    mib = 2 ** 20
    for n_pool in args.sizes:
        streamed_run, brute_run = measure("streamed", n_pool, args.budget), measure("brute", n_pool, args.budget)
        # Matrix products blocked differently may round a tie at a quota's edge differently.
        same = len(set(streamed_run["chosen"]) & set(brute_run["chosen"])) / args.budget
        assert same >= 0.99, f"the two methods selected different problems ({same:.1%} shared)"
        print(f"pool {n_pool:>9,}: streamed {streamed_run['seconds']:6.1f} s, peak +{streamed_run['extra_peak'] / mib:7.0f} "
              f"MiB | brute force {brute_run['seconds']:6.1f} s, peak +{brute_run['extra_peak'] / mib:7.0f} MiB | "
              f"time x{streamed_run['seconds'] / brute_run['seconds']:.2f}, memory "
              f"x{streamed_run['extra_peak'] / max(brute_run['extra_peak'], 1):.3f} (streamed / brute force); "
              f"{same:.1%} of the selection shared")
        stage_run = measure("stage", n_pool, args.budget)
        shared = len(set(stage_run["chosen"]) & set(streamed_run["chosen"])) / args.budget
        assert shared >= 0.99, f"the stage selected other problems ({shared:.1%} shared)"
        print(f"{'':17} the whole stage (read, dedup against seeds, select, write): {stage_run['seconds']:6.1f} s, "
              f"peak +{stage_run['extra_peak'] / mib:7.0f} MiB")


if __name__ == "__main__":
    main()
