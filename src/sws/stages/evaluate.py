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
import random
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
from sws.config import EngineConfig, PipelineConfig
from sws.engines import Request
from sws.errors import UserError
from sws.executors import executor_for
from sws.grading import graded_counts
from sws.llm_calls import request_seed, shared_engines
from sws.policy import policy_prompt
from sws.training.reward import grade_answer_pairs

STAGE = "eval"
CHECKPOINTS = ("start", "initial", "baseline", "augmented")
WEAK_SET = "weak"
WEAK_LIKE_SET = "weak_like"
# The checkpoints the headline compares, in its order.
HEADLINE_CHECKPOINTS = ("initial", "baseline", "augmented")
SEED_SET = "seed"
OVERALL = "overall"
# Held-out arith problems come from a seed stream the seed set never uses.
HELDOUT_SEED_OFFSET = 7919
WEAK_LIKE_SEED_OFFSET = 104729
# Draws per weak problem to find a problem of its family that is in neither the seed set nor this set.
FRESH_DRAWS = 50
EVAL_SCHEMA = {"problem_id": pl.Utf8, "problem": pl.Utf8, "answer": pl.Utf8, "category": pl.Utf8}


@dataclass(frozen=True)
class EvalSet:
    """Problems to evaluate on: a frame with `problem_id, problem, answer, category`."""

    name: str
    problems: pl.DataFrame


def summary_path(run_dir: Path) -> Path:
    return Path(run_dir) / "summary.json"


def read_summary(run_dir: Path) -> dict[str, Any]:
    """The run's summary.json; a UserError names the command that writes it when it is missing or broken."""
    path = summary_path(run_dir)
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
                            f"with shares as numbers; {rerun}")
    return summary


def _is_shares(value: Any) -> bool:
    def share(number: Any) -> bool:
        return number is None or (isinstance(number, int | float) and not isinstance(number, bool))

    return (isinstance(value, dict) and share(value.get("overall"))
            and isinstance(value.get("per_category", {}), dict)
            and all(share(number) for number in value.get("per_category", {}).values()))


def part_path(run_dir: Path, checkpoint: str) -> Path:
    return Path(run_dir) / "eval" / "parts" / f"{checkpoint}.parquet"


def checkpoint_dir(run_dir: Path, checkpoint: str) -> Path:
    return Path(run_dir) / "train" / checkpoint / "final"


def start_checkpoint(cfg: PipelineConfig) -> Path | None:
    """The arith bootstrap policy, only when it is already built (evaluating it must not mean training it)."""
    if cfg.world != "arith":
        return None
    from sws.worlds.arith.bootstrap import cached_bootstrap_policy

    return cached_bootstrap_policy(cfg.arith.bootstrap_steps, cfg.seed, cfg.arith.misconception_rate)


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
    return pl.DataFrame(rows, schema=EVAL_SCHEMA)


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


def weak_like_problems(problems: pl.DataFrame, weakness: pl.DataFrame, seed: int) -> pl.DataFrame:
    """For every weak arith problem, a fresh problem of its family (same shape, level and concepts).

    Solving more weak problems can mean learning the skill or learning those problems; this set tells which.
    """
    from sws.worlds.arith.families import FAMILIES, sample_problem

    families = {family.name: family for family in FAMILIES}
    weak = problems.join(weakness.filter(pl.col("weak")).select("problem_id"), on="problem_id", how="semi")
    rng = random.Random(seed)
    taken = set(problems["problem"])
    rows = []
    for problem_id, family_name in weak.select("problem_id", "family").iter_rows():
        candidates = (sample_problem(families[family_name], rng) for _ in range(FRESH_DRAWS))
        fresh = next((candidate for candidate in candidates if candidate.problem not in taken), None)
        if fresh is None:
            continue
        taken.add(fresh.problem)
        rows.append({"problem_id": f"like-{problem_id}", "problem": fresh.problem, "answer": fresh.answer,
                     "category": fresh.category})
    return pl.DataFrame(rows, schema=EVAL_SCHEMA)


# ---------------------------------------------------------------- sampling and grading


def policy_engine_config(cfg: PipelineConfig, checkpoint: Path) -> EngineConfig:
    return cfg.roles.policy.model_copy(update={"model": str(checkpoint)})


def policy_requests(cfg: PipelineConfig, problems: pl.DataFrame, n: int, temperature: float) -> list[Request]:
    return [
        Request(**policy_prompt(problem, cfg.world), n=n, temperature=temperature, top_p=cfg.roles.policy.top_p,
                max_tokens=cfg.eval.max_tokens, seed=request_seed(cfg.seed, STAGE, problem_id), task="answer",
                fields={"problem": problem})
        for problem_id, problem in problems.select("problem_id", "problem").iter_rows()
    ]


def evaluate_checkpoint(cfg: PipelineConfig, run_dir: Path, checkpoint: str, path: Path,
                        sets: list[EvalSet]) -> pl.DataFrame:
    """Per problem of every set: whether the greedy answer is right (null: ungraded), and how many of the k
    samples were graded (`n`) and right."""
    problems = pl.concat([eval_set.problems.with_columns(pl.lit(eval_set.name).alias("eval_set"))
                          for eval_set in sets])
    k = cfg.eval.k
    requests = [*policy_requests(cfg, problems, 1, 0.0), *policy_requests(cfg, problems, k, cfg.eval.temperature)]
    executor = executor_for(cfg, run_dir)
    with shared_engines():  # on Ray, one pool of workers answers and grades
        completions = executor.complete("policy", policy_engine_config(cfg, path), requests, cfg.eval.shard_size,
                                        f"eval: {checkpoint} answers")
        greedy, sampled = completions[:problems.height], completions[problems.height:]
        answers = problems["answer"].to_list()
        verdicts = executor.map_graded(grade_answer_pairs, [
            *((answer, samples[0].text) for answer, samples in zip(answers, greedy, strict=True)),
            *((answer, sample.text) for answer, samples in zip(answers, sampled, strict=True) for sample in samples)])
    sample_counts = pl.DataFrame(graded_counts(verdicts[problems.height:], k),
                                 schema={"n": pl.Int64, "n_correct": pl.Int64}, orient="row")
    return pl.concat([
        problems.select(pl.lit(checkpoint).alias("checkpoint"), "eval_set", "problem_id", "category",
                        pl.Series("greedy_correct", verdicts[:problems.height], dtype=pl.Boolean)),
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
    sets = [*heldout_sets(cfg, problems), EvalSet(WEAK_SET, weak_problems(problems, weakness))]
    if cfg.world == "arith" and "family" in problems.columns:
        sets.append(EvalSet(WEAK_LIKE_SET, weak_like_problems(problems, weakness, cfg.seed + WEAK_LIKE_SEED_OFFSET)))
    if cfg.eval.seed_set:
        sets.append(EvalSet(SEED_SET, problems.select("problem_id", "problem", "answer", "category")))
    sets = [eval_set for eval_set in sets if eval_set.problems.height]
    settings = {"eval": cfg.eval.model_dump(mode="json", exclude={"shard_size"}), "world": cfg.world,
                "seed": cfg.seed, "policy": cfg.roles.policy, "n_eval_per_category": cfg.arith.n_eval_per_category,
                "sets": [eval_set.name for eval_set in sets]}
    inputs = [table_path(run_dir, "problems"), table_path(run_dir, "weakness")]
    for checkpoint, path in checkpoints.items():
        out = part_path(run_dir, checkpoint)

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

    parts = [part_path(run_dir, checkpoint) for checkpoint in checkpoints]

    def aggregate() -> StageResult:
        per_problem = pl.concat([read_parquet(part) for part in parts])
        benchmarks = benchmark_table(per_problem)
        weakness_solved = weakness_table(per_problem)
        write_table(run_dir, "eval/problems", per_problem)
        write_table(run_dir, "eval/benchmarks", benchmarks)
        write_table(run_dir, "eval/weakness", weakness_solved)
        headline = summary(weakness_solved, list(checkpoints), benchmarks, ungraded_answers(per_problem, cfg.eval.k))
        write_json(summary_path(run_dir), {**headline, "environment": environment()})
        return StageResult("eval", rows={"eval/problems": per_problem.height, "eval/benchmarks": benchmarks.height},
                           info={"checkpoints": list(checkpoints)})

    return run_stage(run_dir, "eval", config={"checkpoints": list(checkpoints)}, inputs=parts,
                     outputs=[table_path(run_dir, name) for name in ("eval/problems", "eval/benchmarks",
                                                                      "eval/weakness")] + [summary_path(run_dir)],
                     body=aggregate, force=force)
