"""`sws eval`: every checkpoint of a run on held-out sets, on the seed set and on the run's weak problems.

Per checkpoint (start = the bootstrap policy when it is at hand, initial, baseline, augmented) and per problem:
the greedy answer (Pass@1) and `eval.k` samples at `eval.temperature` (Avg@k), graded with `sws.grading`.
Each checkpoint is its own resumable step (`manifests/eval-<checkpoint>.json`, `eval/parts/<checkpoint>.parquet`),
so retraining one policy re-evaluates only that one. The aggregates are `eval/problems.parquet` (per problem),
`eval/benchmarks.parquet` (Pass@1 / Avg@k per set and category), `eval/weakness.parquet` (share of the run's
weak problems each checkpoint solves greedily) and `summary.json` (the headline).

An answer whose grading ran out of time is ungraded: its `greedy_correct` is null, and `n` counts only the graded
samples, so every share is over graded answers. `summary.json`'s `ungraded` counts them per checkpoint.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from sws import ui
from sws.artifacts import (
    StageResult,
    check_schema,
    environment,
    read_parquet,
    read_table,
    run_stage,
    table_path,
    write_json,
    write_parquet,
    write_table,
)
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.grading import graded_count
from sws.llm_calls import shared_engines
from sws.policy import Sampling, sample_and_grade
from sws.run_dir import RunDir
from sws.stage import Stage
from sws.world import get_world

STAGE = "eval"
CHECKPOINTS = ("start", "initial", "baseline", "augmented")
WEAK_SET = "weak"
WEAK_LIKE_SET = "weak_like"
# The checkpoints the headline compares, in its order.
HEADLINE_CHECKPOINTS = ("initial", "baseline", "augmented")
SEED_SET = "seed"
OVERALL = "overall"


@dataclass(frozen=True)
class EvalSet:
    """Problems to evaluate on: a frame with `problem_id, problem, answer, category`."""

    name: str
    problems: pl.DataFrame




def read_summary(run_dir: Path) -> dict[str, Any]:
    """The run's summary.json; a UserError names the command that writes it when it is missing or broken."""
    path = RunDir(run_dir).summary
    if not path.is_file():
        raise UserError(f"{path}: not found; run `sws eval --run {run_dir}` first")
    rerun = f"rerun `sws eval --run {run_dir} --force`"
    try:
        summary = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise UserError(f"{path}: not valid JSON ({exc.msg}); {rerun}") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file; {rerun}") from None
    if not isinstance(summary, dict):
        raise UserError(f"{path}: expected a JSON object; {rerun}")
    for key, value in summary.items():
        if key.startswith(("weak_solved_", "weak_like_solved_")) and not _is_shares(value):
            raise UserError(f"{path}: field '{key}' is not {{overall: share, per_category: {{category: share}}}} "
                            f"with shares as numbers from 0 to 1; {rerun}")
    environment = summary.get("environment", {})
    if not isinstance(environment, dict) or not isinstance(environment.get("versions", {}), dict):
        raise UserError(f"{path}: field 'environment' is not an object with a 'versions' object; {rerun}")
    return summary


def _is_shares(value: Any) -> bool:
    def share(number: Any) -> bool:  # JSON may hold NaN and Infinity, which json.loads reads as floats
        return number is None or (isinstance(number, int | float) and not isinstance(number, bool)
                                   and math.isfinite(number) and 0 <= number <= 1)

    return (isinstance(value, dict) and share(value.get("overall"))
            and isinstance(value.get("per_category", {}), dict)
            and all(share(number) for number in value.get("per_category", {}).values()))






def start_checkpoint(cfg: PipelineConfig) -> Path | None:
    """The policy the world builds for initial training, only when it is already built (evaluating it must not
    mean training it)."""
    built = get_world(cfg.world).built_policy(cfg)
    return built.cached() if built is not None else None


def present_checkpoints(cfg: PipelineConfig, run_dir: Path) -> dict[str, Path]:
    """The checkpoints of `cfg.eval.checkpoints` that exist, in that order."""
    found = {}
    for name in cfg.eval.checkpoints:
        path = start_checkpoint(cfg) if name == "start" else RunDir(run_dir).checkpoint(name)
        if path is not None and (path / "config.json").exists():
            found[name] = path
    return found


# ---------------------------------------------------------------- problem sets


def benchmark_set(name: str, world: str) -> pl.DataFrame:
    """A math benchmark shipped in data/ (MATH-500, AIME 24/25, GSM8K), normalised like `sws prepare` does."""
    from sws.stages.prepare import PRESETS, load_preset_benchmark

    if name not in PRESETS:
        raise UserError(f"eval.benchmarks: '{name}' is neither a held-out set of world '{world}' nor a shipped "
                        f"benchmark; use one of {', '.join(PRESETS)}")
    return load_preset_benchmark(name).select("problem_id", "problem", "answer", "category")


def heldout_sets(cfg: PipelineConfig, seed_problems: pl.DataFrame) -> list[EvalSet]:
    """`eval.benchmarks`: each a set of the run's world (arith's fresh problems), else a shipped benchmark."""
    world = get_world(cfg.world)
    sets = []
    for name in cfg.eval.benchmarks:
        problems = world.heldout_set(name, cfg, seed_problems)
        if problems is None:
            problems = benchmark_set(name, cfg.world)
        sets.append(EvalSet(name, problems))
    return sets


def weak_problems(problems: pl.DataFrame, weakness: pl.DataFrame) -> pl.DataFrame:
    weak_ids = weakness.filter(pl.col("weak")).select("problem_id")
    return problems.join(weak_ids, on="problem_id", how="semi").select("problem_id", "problem", "answer", "category")


# ---------------------------------------------------------------- sampling and grading


def evaluate_checkpoint(cfg: PipelineConfig, run_dir: Path, checkpoint: str, path: Path,
                        sets: list[EvalSet]) -> pl.DataFrame:
    """Per problem of every set: whether the greedy answer is right (null: ungraded), and how many of the k
    samples were graded (`n`) and right."""
    problems = pl.concat([eval_set.problems.with_columns(pl.lit(eval_set.name).alias("eval_set"))
                          for eval_set in sets])
    k, max_tokens = cfg.eval.k, cfg.eval.max_tokens
    asked = list(problems.select("problem_id", "problem", "answer").iter_rows())
    with shared_engines():  # on Ray, one pool of workers answers and grades
        greedy, sampled = sample_and_grade(
            cfg, run_dir, cfg.roles.policy.model_copy(update={"model": str(path)}), asked,
            [Sampling(1, 0.0, max_tokens, (STAGE,)), Sampling(k, cfg.eval.temperature, max_tokens, (STAGE,))],
            cfg.eval.shard_size, f"eval: {checkpoint} answers")
    sample_counts = pl.DataFrame([graded_count(verdicts) for verdicts in sampled],
                                 schema={"n": pl.Int64, "n_correct": pl.Int64}, orient="row")
    return pl.concat([
        problems.select(pl.lit(checkpoint).alias("checkpoint"), "eval_set", "problem_id", "category",
                        pl.Series("greedy_correct", [verdicts[0] for verdicts in greedy], dtype=pl.Boolean)),
        sample_counts,
    ], how="horizontal")


def ungraded_answers(per_problem: pl.DataFrame, k: int) -> dict[str, int]:
    """Per checkpoint: its greedy answers and samples (k per problem) whose grading ran out of time."""
    counts = per_problem.group_by("checkpoint", maintain_order=True).agg(
        (pl.col("greedy_correct").null_count() + (k - pl.col("n")).sum()).cast(pl.Int64).alias("ungraded"))
    return dict(counts.iter_rows())


# ---------------------------------------------------------------- aggregates


def with_overall(per_category: pl.DataFrame, aggregations: list[pl.Expr], keys: list[str]) -> pl.DataFrame:
    """Group by `keys` + category, plus one `category = "overall"` row per `keys` group (listed last).

    Checkpoints are listed in training order (start, initial, baseline, augmented), not alphabetically.
    """
    by_category = per_category.group_by([*keys, "category"]).agg(aggregations)
    overall = per_category.group_by(keys).agg(aggregations).with_columns(pl.lit(OVERALL).alias("category"))
    checkpoint_rank = pl.col("checkpoint").replace_strict(
        {name: rank for rank, name in enumerate(CHECKPOINTS)}, default=len(CHECKPOINTS), return_dtype=pl.Int64)
    other_keys = [key for key in keys if key != "checkpoint"]
    return pl.concat([by_category, overall.select(by_category.columns)]).sort(
        [checkpoint_rank, *other_keys, pl.col("category") == OVERALL, "category"])


def benchmark_table(per_problem: pl.DataFrame) -> pl.DataFrame:
    """Pass@1 (greedy) and Avg@k per checkpoint, evaluation set and category, over the graded answers."""
    aggregations = [
        pl.len().cast(pl.Int64).alias("n"),
        pl.col("greedy_correct").mean().alias("pass1"),
        pl.when(pl.col("n").sum() > 0).then(pl.col("n_correct").sum() / pl.col("n").sum()).alias("avg_k"),
    ]
    return with_overall(per_problem.filter(pl.col("eval_set") != WEAK_SET), aggregations,
                        ["checkpoint", "eval_set"])


def weakness_table(per_problem: pl.DataFrame) -> pl.DataFrame:
    """Per checkpoint and category: how many of the run's weak problems it solves greedily (`solved`: the share
    of those whose greedy answer was graded)."""
    aggregations = [
        pl.len().cast(pl.Int64).alias("n_weak"),
        pl.col("greedy_correct").sum().cast(pl.Int64).alias("n_solved"),
        pl.col("greedy_correct").mean().alias("solved"),
    ]
    return with_overall(per_problem.filter(pl.col("eval_set") == WEAK_SET), aggregations, ["checkpoint"])


def summary(weakness: pl.DataFrame, checkpoints: list[str], benchmarks: pl.DataFrame,
            ungraded: dict[str, int]) -> dict[str, Any]:
    """`weak_solved_<checkpoint>`: {"overall": share, "per_category": {category: share}} for each checkpoint,
    `n_weak`, and `ungraded`: {checkpoint: answers whose grading ran out of time}. With no weak problems the
    shares are None: there is nothing to mitigate. In the arith world also `weak_like_solved_<checkpoint>`, the
    same shares on fresh problems of the weak problems' families."""
    weak_like = benchmarks.filter(pl.col("eval_set") == WEAK_LIKE_SET).rename({"pass1": "solved"})
    tables = [("weak_solved", weakness), *([("weak_like_solved", weak_like)] if weak_like.height else [])]
    result: dict[str, Any] = {}
    for prefix, table in tables:
        for checkpoint in checkpoints:
            rows = table.filter(pl.col("checkpoint") == checkpoint)
            shares = dict(zip(rows["category"], rows["solved"], strict=True))
            result[f"{prefix}_{checkpoint}"] = {
                "overall": shares.pop(OVERALL, None),
                "per_category": dict(sorted(shares.items())),
            }
    overall = weakness.filter(pl.col("category") == OVERALL)
    result["n_weak"] = int(overall["n_weak"][0]) if overall.height else 0
    result["ungraded"] = {checkpoint: ungraded.get(checkpoint, 0) for checkpoint in checkpoints}
    return result


# ---------------------------------------------------------------- stage


def run(cfg: PipelineConfig, run_dir: Path, force: bool = False) -> StageResult:
    run_dir = Path(run_dir)
    problems = read_table(run_dir, "problems")
    weakness = read_table(run_dir, "weakness")
    checkpoints = present_checkpoints(cfg, run_dir)
    if not checkpoints:
        raise UserError(f"{run_dir / 'train'}: no checkpoint to evaluate; run `sws train initial --run {run_dir}` first")
    world = get_world(cfg.world)
    sets = [*heldout_sets(cfg, problems), EvalSet(WEAK_SET, weak_problems(problems, weakness))]
    weak_like = world.weak_like_set(cfg, problems, weakness)
    if weak_like is not None:
        sets.append(EvalSet(WEAK_LIKE_SET, weak_like))
    if cfg.eval.seed_set:
        sets.append(EvalSet(SEED_SET, problems.select("problem_id", "problem", "answer", "category")))
    sets = [eval_set for eval_set in sets if eval_set.problems.height]
    settings = {"eval": cfg.eval.model_dump(mode="json", exclude={"shard_size"}), "world": cfg.world,
                "seed": cfg.seed, "policy": cfg.roles.policy, **world.eval_identity(cfg),
                "sets": [eval_set.name for eval_set in sets]}
    inputs = [table_path(run_dir, "problems"), table_path(run_dir, "weakness")]
    for checkpoint, path in checkpoints.items():
        out = RunDir(run_dir).eval_part(checkpoint)

        def evaluate_one(checkpoint: str = checkpoint, path: Path = path, out: Path = out) -> StageResult:
            ui.info(f"eval: {checkpoint} ({path})")
            table = evaluate_checkpoint(cfg, run_dir, checkpoint, path, sets)
            check_schema(table, "eval/problems", out)
            write_parquet(table, out)
            ungraded = ungraded_answers(table, cfg.eval.k).get(checkpoint, 0)
            if ungraded:
                ui.info(f"eval: {ungraded} of {checkpoint}'s answers ran out of grading time (grading.deadline_s); "
                        "the shares leave them out")
            return StageResult(f"eval-{checkpoint}", rows={out.name: table.height}, info={"ungraded": ungraded})

        run_stage(run_dir, f"eval-{checkpoint}", config=settings, inputs=[*inputs, path], outputs=[out],
                  body=evaluate_one, force=force)

    parts = [RunDir(run_dir).eval_part(checkpoint) for checkpoint in checkpoints]

    def aggregate() -> StageResult:
        per_problem = pl.concat([read_parquet(part) for part in parts])
        benchmarks = benchmark_table(per_problem)
        weakness_solved = weakness_table(per_problem)
        write_table(run_dir, "eval/problems", per_problem)
        write_table(run_dir, "eval/benchmarks", benchmarks)
        write_table(run_dir, "eval/weakness", weakness_solved)
        headline = summary(weakness_solved, list(checkpoints), benchmarks, ungraded_answers(per_problem, cfg.eval.k))
        write_json(RunDir(run_dir).summary, {**headline, "environment": environment()})
        return StageResult("eval", rows={"eval/problems": per_problem.height, "eval/benchmarks": benchmarks.height},
                           info={"checkpoints": list(checkpoints)})

    return run_stage(run_dir, "eval", config={"checkpoints": list(checkpoints)}, inputs=parts,
                     outputs=[table_path(run_dir, name) for name in ("eval/problems", "eval/benchmarks",
                                                                      "eval/weakness")] + [RunDir(run_dir).summary],
                     body=aggregate, force=force)


DECLARED = (Stage(
    STAGE, "Pass@1 and Avg@k of every checkpoint, and the share of the run's weak problems each now solves.",
    run, reads=("problems", "weakness"), writes=("eval/problems", "eval/benchmarks", "eval/weakness"),
    section="eval", uses_executor=True, command="sws eval"),)
