"""`sws eval`: every checkpoint of a run on held-out sets, on the seed set and on the run's weak problems.

Per checkpoint (start = the bootstrap policy when it is at hand, initial, baseline, augmented) and per problem:
the greedy answer (Pass@1) and `eval.k` samples at `eval.temperature` (Avg@k), graded with `sws.grading`.
Each checkpoint is its own resumable step (`manifests/eval-<checkpoint>.json`, `eval/parts/<checkpoint>.parquet`),
so retraining one policy re-evaluates only that one. The aggregates are `eval/problems.parquet` (per problem),
`eval/benchmarks.parquet` (Pass@1 / Avg@k per set and category), `eval/weakness.parquet` (share of the run's
weak problems each checkpoint solves greedily) and `summary.json` (the headline).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from sws import ui
from sws.artifacts import (
    SCHEMAS,
    StageResult,
    check_schema,
    read_parquet,
    read_table,
    run_stage,
    table_path,
    write_json,
    write_parquet,
    write_table,
)
from sws.config import EngineConfig, PipelineConfig
from sws.engines import Request, make_engine
from sws.errors import UserError
from sws.grading import extract_answer, grade_many
from sws.policy import policy_prompt

CHECKPOINTS = ("start", "initial", "baseline", "augmented")
WEAK_SET = "weak"
SEED_SET = "seed"
OVERALL = "overall"
# Held-out arith problems come from a seed stream the seed set never uses.
HELDOUT_SEED_OFFSET = 7919


@dataclass(frozen=True)
class EvalSet:
    """Problems to evaluate on: a frame with `problem_id, problem, answer, category`."""

    name: str
    problems: pl.DataFrame


def summary_path(run_dir: Path) -> Path:
    return Path(run_dir) / "summary.json"


def part_path(run_dir: Path, checkpoint: str) -> Path:
    return Path(run_dir) / "eval" / "parts" / f"{checkpoint}.parquet"


def checkpoint_dir(run_dir: Path, checkpoint: str) -> Path:
    return Path(run_dir) / "train" / checkpoint / "final"


def start_checkpoint(cfg: PipelineConfig) -> Path | None:
    """The arith bootstrap policy, only when it is already built (evaluating it must not mean training it)."""
    if cfg.world != "arith":
        return None
    from sws.worlds.arith.bootstrap import cached_bootstrap_policy

    return cached_bootstrap_policy(steps=cfg.arith.bootstrap_steps, seed=cfg.seed)


def present_checkpoints(cfg: PipelineConfig, run_dir: Path) -> dict[str, Path]:
    """The checkpoints of `cfg.eval.checkpoints` that exist, in that order."""
    found = {}
    for name in cfg.eval.checkpoints:
        path = start_checkpoint(cfg) if name == "start" else checkpoint_dir(run_dir, name)
        if path is not None and (path / "config.json").exists():
            found[name] = path
    return found


# ---------------------------------------------------------------- problem sets


def arith_heldout(n_per_category: int, categories: list[str], seed: int, exclude: set[str]) -> pl.DataFrame:
    """Fresh arith problems per category, none of them in `exclude` (the seed set's texts)."""
    from sws.worlds.arith import generate_problems

    rows = []
    for category in categories:
        candidates = generate_problems(2 * n_per_category, seed=seed, categories=[category])
        fresh = [p for p in candidates if p.problem not in exclude][:n_per_category]
        rows += [{"problem_id": f"heldout-{category}-{i}", "problem": p.problem, "answer": p.answer,
                  "category": category} for i, p in enumerate(fresh)]
    return pl.DataFrame(rows, schema={"problem_id": pl.Utf8, "problem": pl.Utf8, "answer": pl.Utf8,
                                      "category": pl.Utf8})


def benchmark_set(name: str) -> pl.DataFrame:
    """A math benchmark shipped in data/ (MATH-500, AIME 24/25, GSM8K), normalised like `sws prepare` does."""
    from sws.stages.prepare import load_preset_benchmark

    return load_preset_benchmark(name).select("problem_id", "problem", "answer", "category")


def heldout_sets(cfg: PipelineConfig, seed_problems: pl.DataFrame) -> list[EvalSet]:
    sets = []
    for name in cfg.eval.benchmarks:
        if name == "arith":
            if cfg.world != "arith":
                raise UserError("eval.benchmarks: 'arith' needs world: arith; use math500, aime24, aime25 or gsm8k")
            categories = sorted(set(seed_problems["category"]))
            problems = arith_heldout(cfg.arith.n_eval_per_category, categories,
                                     cfg.seed + HELDOUT_SEED_OFFSET, set(seed_problems["problem"]))
        else:
            problems = benchmark_set(name)
        sets.append(EvalSet(name, problems))
    return sets


def weak_problems(problems: pl.DataFrame, weakness: pl.DataFrame) -> pl.DataFrame:
    weak_ids = weakness.filter(pl.col("weak")).select("problem_id")
    return problems.join(weak_ids, on="problem_id", how="semi").select("problem_id", "problem", "answer", "category")


# ---------------------------------------------------------------- sampling and grading


def graded(golds: list[str], texts: list[str]) -> list[bool]:
    return grade_many([(gold, extract_answer(text)) for gold, text in zip(golds, texts, strict=True)])


def policy_engine_config(cfg: PipelineConfig, checkpoint: Path) -> EngineConfig:
    return cfg.roles.policy.model_copy(update={"model": str(checkpoint)})


def evaluate_set(generate: Callable[[list[Request]], list[list[Any]]], cfg: PipelineConfig,
                 eval_set: EvalSet) -> pl.DataFrame:
    """Per problem of `eval_set`: whether the greedy answer is right, and how many of k samples are."""
    problems = eval_set.problems
    prompts = [policy_prompt(problem, cfg.world) for problem in problems["problem"]]
    common = {"max_tokens": cfg.eval.max_tokens, "seed": cfg.seed, "task": "answer"}
    greedy = generate([Request(**prompt, n=1, temperature=0.0, fields={"problem": problem}, **common)
                       for prompt, problem in zip(prompts, problems["problem"], strict=True)])
    sampled = generate([Request(**prompt, n=cfg.eval.k, temperature=cfg.eval.temperature,
                                fields={"problem": problem}, **common)
                        for prompt, problem in zip(prompts, problems["problem"], strict=True)])
    golds = problems["answer"].to_list()
    greedy_correct = graded(golds, [completions[0].text for completions in greedy])
    flat_correct = graded([gold for gold in golds for _ in range(cfg.eval.k)],
                          [completion.text for completions in sampled for completion in completions])
    n_correct = [sum(flat_correct[i * cfg.eval.k:(i + 1) * cfg.eval.k]) for i in range(problems.height)]
    return problems.select("problem_id", "category").with_columns(
        pl.lit(eval_set.name).alias("eval_set"),
        pl.Series("greedy_correct", greedy_correct, dtype=pl.Boolean),
        pl.lit(cfg.eval.k, dtype=pl.Int64).alias("n"),
        pl.Series("n_correct", n_correct, dtype=pl.Int64),
    )


def evaluate_checkpoint(cfg: PipelineConfig, run_dir: Path, checkpoint: str, path: Path,
                        sets: list[EvalSet]) -> pl.DataFrame:
    engine = make_engine(policy_engine_config(cfg, path), run_dir)
    try:
        parts = [evaluate_set(engine.generate, cfg, eval_set) for eval_set in sets if eval_set.problems.height]
    finally:
        engine.close()
    table = pl.concat(parts) if parts else pl.DataFrame(schema=SCHEMAS["eval/problems"])
    return table.with_columns(pl.lit(checkpoint).alias("checkpoint")).select(list(SCHEMAS["eval/problems"]))


# ---------------------------------------------------------------- aggregates


def with_overall(per_category: pl.DataFrame, aggregations: list[pl.Expr], keys: list[str]) -> pl.DataFrame:
    """Group by `keys` + category, plus one `category = "overall"` row per `keys` group."""
    by_category = per_category.group_by([*keys, "category"]).agg(aggregations)
    overall = per_category.group_by(keys).agg(aggregations).with_columns(pl.lit(OVERALL).alias("category"))
    return pl.concat([by_category, overall.select(by_category.columns)]).sort([*keys, "category"])


def benchmark_table(per_problem: pl.DataFrame) -> pl.DataFrame:
    """Pass@1 (greedy) and Avg@k per checkpoint, evaluation set and category."""
    aggregations = [
        pl.len().cast(pl.Int64).alias("n"),
        pl.col("greedy_correct").mean().alias("pass1"),
        (pl.col("n_correct").sum() / pl.col("n").sum()).alias("avg_k"),
    ]
    return with_overall(per_problem.filter(pl.col("eval_set") != WEAK_SET), aggregations,
                        ["checkpoint", "eval_set"])


def weakness_table(per_problem: pl.DataFrame) -> pl.DataFrame:
    """Per checkpoint and category: how many of the run's weak problems it solves greedily."""
    aggregations = [
        pl.len().cast(pl.Int64).alias("n_weak"),
        pl.col("greedy_correct").sum().cast(pl.Int64).alias("n_solved"),
        pl.col("greedy_correct").mean().alias("solved"),
    ]
    return with_overall(per_problem.filter(pl.col("eval_set") == WEAK_SET), aggregations, ["checkpoint"])


def summary(weakness: pl.DataFrame, checkpoints: list[str]) -> dict[str, Any]:
    """`weak_solved_<checkpoint>`: {"overall": share, "per_category": {category: share}} for each checkpoint,
    and `n_weak`. With no weak problems the shares are None: there is nothing to mitigate."""
    result: dict[str, Any] = {}
    for checkpoint in checkpoints:
        rows = weakness.filter(pl.col("checkpoint") == checkpoint)
        shares = dict(zip(rows["category"], rows["solved"], strict=True))
        result[f"weak_solved_{checkpoint}"] = {
            "overall": shares.pop(OVERALL, None),
            "per_category": dict(sorted(shares.items())),
        }
    overall = weakness.filter(pl.col("category") == OVERALL)
    result["n_weak"] = int(overall["n_weak"][0]) if overall.height else 0
    return result


# ---------------------------------------------------------------- stage


def run(cfg: PipelineConfig, run_dir: Path, force: bool = False) -> StageResult:
    run_dir = Path(run_dir)
    problems = read_table(run_dir, "problems")
    weakness = read_table(run_dir, "weakness")
    checkpoints = present_checkpoints(cfg, run_dir)
    if not checkpoints:
        raise UserError(f"{run_dir / 'train'}: no checkpoint to evaluate; run `sws train initial --run {run_dir}` first")
    sets = [*heldout_sets(cfg, problems), EvalSet(WEAK_SET, weak_problems(problems, weakness))]
    if cfg.eval.seed_set:
        sets.append(EvalSet(SEED_SET, problems.select("problem_id", "problem", "answer", "category")))
    settings = {"eval": cfg.eval, "world": cfg.world, "seed": cfg.seed, "policy": cfg.roles.policy,
                "n_eval_per_category": cfg.arith.n_eval_per_category}
    inputs = [table_path(run_dir, "problems"), table_path(run_dir, "weakness")]
    for checkpoint, path in checkpoints.items():
        out = part_path(run_dir, checkpoint)

        def evaluate_one(checkpoint: str = checkpoint, path: Path = path, out: Path = out) -> StageResult:
            ui.info(f"eval: {checkpoint} ({path})")
            table = evaluate_checkpoint(cfg, run_dir, checkpoint, path, sets)
            check_schema(table, "eval/problems", out)
            write_parquet(table, out)
            return StageResult(f"eval-{checkpoint}", rows={out.name: table.height})

        run_stage(run_dir, f"eval-{checkpoint}", config=settings, inputs=[*inputs, path], outputs=[out],
                  body=evaluate_one, force=force)

    parts = [part_path(run_dir, checkpoint) for checkpoint in checkpoints]

    def aggregate() -> StageResult:
        per_problem = pl.concat([read_parquet(part) for part in parts])
        benchmarks = benchmark_table(per_problem)
        weakness_solved = weakness_table(per_problem)
        write_table(run_dir, "eval/problems", per_problem)
        write_table(run_dir, "eval/benchmarks", benchmarks)
        write_table(run_dir, "eval/weakness", weakness_solved)
        headline = summary(weakness_solved, list(checkpoints))
        write_json(summary_path(run_dir), headline)
        return StageResult("eval", rows={"eval/problems": per_problem.height, "eval/benchmarks": benchmarks.height},
                           info={"checkpoints": list(checkpoints)})

    return run_stage(run_dir, "eval", config={"checkpoints": list(checkpoints)}, inputs=parts,
                     outputs=[table_path(run_dir, name) for name in ("eval/problems", "eval/benchmarks",
                                                                      "eval/weakness")] + [summary_path(run_dir)],
                     body=aggregate, force=force)
