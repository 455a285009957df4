"""`sws eval`: every checkpoint of a run on held-out sets, on the seed set and on the run's weak problems.

The problems come first (`eval-sets`: `eval/sets.parquet`): the held-out sets of `eval.benchmarks`, none holding a
problem any arm trains on (`sws.held_out`), the run's weak problems, the world's fresh problems of their families
(`weak_like`) and the seed set. Then per checkpoint (`eval.checkpoints` of `sws.arms.CHECKPOINTS` that exist:
start = the bootstrap policy when it is at hand, and each trained arm) and per problem: the greedy answer (Pass@1)
and `eval.k` samples at `eval.temperature` (Avg@k), graded with `sws.grading`. Each checkpoint is its own
resumable stage (`manifests/eval-<checkpoint>.json`, `eval/parts/<checkpoint>.parquet`), so retraining one policy
re-evaluates only that one. The aggregates (`eval`) are `eval/problems.parquet` (per problem),
`eval/benchmarks.parquet` (Pass@1 / Avg@k per set and category), `eval/weakness.parquet` (share of the run's
weak problems each checkpoint solves greedily) and `summary.json` (the headline).

An answer whose grading ran out of time is ungraded: its `greedy_correct` is null, and `n` counts only the graded
samples, so every share is over graded answers. `summary.json`'s `ungraded` counts them per checkpoint.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from sws import arms, held_out, runner, ui
from sws.answer import mean_error, per_problem_scores
from sws.arms import CHECKPOINTS
from sws.atomic_files import json_text
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.executors import Executor
from sws.grading import graded_count
from sws.llm_calls import shared_engines
from sws.manifests import StageResult, environment
from sws.policy import Sampling, sample_and_grade
from sws.records import PRESETS, load_preset_benchmark
from sws.run_dir import RunDir
from sws.runner import StageContext, StageOutput
from sws.stage import Stage
from sws.tables import INT, empty_table
from sws.world import get_world

STEP = "eval"
SETS = "eval/sets"
WEAK_SET = "weak"
WEAK_LIKE_SET = "weak_like"
SEED_SET = "seed"
OVERALL = "overall"
# Per set of the headline: the summary.json prefixes of its greedy share and its share over k samples; each
# `<prefix>_<checkpoint>` holds {overall, per_category}.
SET_SHARES = {WEAK_SET: ("weak_solved", "weak_avg_k"), WEAK_LIKE_SET: ("weak_like_solved", "weak_like_avg_k")}
SHARE_PREFIXES = tuple(f"{prefix}_" for prefixes in SET_SHARES.values() for prefix in prefixes)
# The paired difference `standard_errors` gives besides each checkpoint's (`sws.arms.HEADLINE`).
DIFFERENCE = " − ".join(arms.HEADLINE)


@dataclass(frozen=True)
class EvalSet:
    """Problems to evaluate on: a frame with `problem_id, problem, answer, category`, sampled k times each.

    `benchmark`: one of eval.benchmarks, in the per-benchmark summary; `held_out`: no checkpoint trains on it."""

    name: str
    problems: pl.DataFrame
    k: int
    benchmark: bool = False
    held_out: bool = False


def sets_table(sets: list[EvalSet]) -> pl.DataFrame:
    """`eval/sets`: every set's problems, each row with its set's name, k and kind."""
    if not sets:
        return empty_table(SETS)
    return pl.concat([
        eval_set.problems.select(
            pl.lit(eval_set.name).alias("eval_set"), "problem_id", "problem", "answer", "category",
            pl.lit(eval_set.k, dtype=INT).alias("k"), pl.lit(eval_set.benchmark).alias("benchmark"),
            pl.lit(eval_set.held_out).alias("held_out"))
        for eval_set in sets])


def sets_of(table: pl.DataFrame) -> list[EvalSet]:
    """The sets `sets_table` wrote, in their order."""
    return [EvalSet(name, rows.select("problem_id", "problem", "answer", "category"), rows["k"][0],
                    rows["benchmark"][0], rows["held_out"][0])
            for (name,), rows in table.group_by("eval_set", maintain_order=True)]


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
        if key.startswith(SHARE_PREFIXES) and not _is_shares(value):
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


def checkpoint_path(cfg: PipelineConfig, run: RunDir, name: str) -> Path | None:
    """Where checkpoint `name` lies (`base`: train.init_model, a hub id or a folder), or None when it does not."""
    if name == "base":
        return Path(cfg.train.init_model) if cfg.train.init_model else None
    path = start_checkpoint(cfg) if name == "start" else run.checkpoint(name)
    return path if path is not None and (path / "config.json").exists() else None


def present_checkpoints(cfg: PipelineConfig, run: RunDir) -> dict[str, Path]:
    """The checkpoints of `cfg.eval.checkpoints` that exist, in that order."""
    paths = {name: checkpoint_path(cfg, run, name) for name in cfg.eval.checkpoints}
    return {name: path for name, path in paths.items() if path is not None}


# ---------------------------------------------------------------- problem sets


def benchmark_set(name: str, world: str) -> pl.DataFrame:
    """A math benchmark shipped in data/ (MATH-500, AIME 24/25, GSM8K), normalised like `sws prepare` does."""

    if name not in PRESETS:
        raise UserError(f"eval.benchmarks: '{name}' is neither a held-out set of world '{world}' nor a shipped "
                        f"benchmark; use one of {', '.join(PRESETS)}")
    return load_preset_benchmark(name).select("problem_id", "problem", "answer", "category")


def heldout_sets(cfg: PipelineConfig, config_file: Path, seed_problems: pl.DataFrame,
                 training: pl.DataFrame, trained_on: set[str]) -> list[EvalSet]:
    """`eval.benchmarks`: each a file, a set of the run's world (arith's fresh problems, less any training
    problem: `trained_on` holds their keys), else a shipped benchmark. A file or shipped set holding a training
    problem is a UserError naming `config_file`."""
    world = get_world(cfg.world)
    sets = []
    for entry in held_out.benchmark_entries(cfg):
        drawn = None if entry.file is not None else world.heldout_set(entry.name, cfg, seed_problems, trained_on)
        if drawn is not None:
            problems = held_out.without_training(drawn, training)
        else:
            problems = (held_out.read_benchmark_file(entry) if entry.file is not None
                        else benchmark_set(entry.name, cfg.world))
            held_out.refuse_overlap(entry.name, problems, training, config_file)
        sets.append(EvalSet(entry.name, problems, entry.k or cfg.eval.k, benchmark=True, held_out=True))
    return sets


def weak_problems(problems: pl.DataFrame, weakness: pl.DataFrame) -> pl.DataFrame:
    weak_ids = weakness.filter(pl.col("weak")).select("problem_id")
    return problems.join(weak_ids, on="problem_id", how="semi").select("problem_id", "problem", "answer", "category")


# ---------------------------------------------------------------- sampling and grading


def evaluate_checkpoint(cfg: PipelineConfig, executor: Executor, checkpoint: str, path: Path,
                        sets: list[EvalSet]) -> pl.DataFrame:
    """Per problem of every set: whether the greedy answer is right (null: ungraded), and how many of the k
    samples were graded (`n`) and right."""
    max_tokens = cfg.eval.max_tokens
    policy = cfg.roles.policy.model_copy(update={"model": str(path)})
    parts = []
    # One sampling call per k (sets with their own k, e.g. AIME's Avg@32), so the request cache keys stay those
    # of a run with one k.
    for k in sorted({eval_set.k for eval_set in sets}):
        problems = pl.concat([eval_set.problems.with_columns(pl.lit(eval_set.name).alias("eval_set"),
                                                             pl.lit(k, dtype=pl.Int64).alias("k"))
                              for eval_set in sets if eval_set.k == k])
        asked = list(problems.select("problem_id", "problem", "answer").iter_rows())
        with shared_engines():  # on Ray, one pool of workers answers and grades
            greedy, sampled = sample_and_grade(
                cfg, executor, policy, asked,
                [Sampling(1, 0.0, max_tokens, (STEP,)), Sampling(k, cfg.eval.temperature, max_tokens, (STEP,))],
                cfg.eval.shard_size, f"eval: {checkpoint} answers")
        sample_counts = pl.DataFrame([graded_count(verdicts) for verdicts in sampled],
                                     schema={"n": pl.Int64, "n_correct": pl.Int64}, orient="row")
        parts.append(pl.concat([
            problems.select(pl.lit(checkpoint).alias("checkpoint"), "eval_set", "problem_id", "category",
                            pl.Series("greedy_correct", [verdicts[0] for verdicts in greedy], dtype=pl.Boolean)),
            sample_counts,
            problems.select("k", "problem"),
        ], how="horizontal"))
    order = {eval_set.name: rank for rank, eval_set in enumerate(sets)}
    return pl.concat(parts).sort(pl.col("eval_set").replace_strict(order, return_dtype=pl.Int64), maintain_order=True)


def ungraded_answers(per_problem: pl.DataFrame) -> dict[str, int]:
    """Per checkpoint: its greedy answers and samples (k per problem) whose grading ran out of time."""
    counts = per_problem.group_by("checkpoint", maintain_order=True).agg(
        (pl.col("greedy_correct").null_count() + (pl.col("k") - pl.col("n")).sum()).cast(pl.Int64).alias("ungraded"))
    return dict(counts.iter_rows())


# ---------------------------------------------------------------- aggregates


def with_overall(per_category: pl.DataFrame, aggregations: list[pl.Expr], keys: list[str]) -> pl.DataFrame:
    """Group by `keys` + category, plus one `category = "overall"` row per `keys` group (listed last).

    Checkpoints are listed in `sws.arms.CHECKPOINTS` order (base, start, then the arms), not alphabetically.
    """
    by_category = per_category.group_by([*keys, "category"]).agg(aggregations)
    overall = per_category.group_by(keys).agg(aggregations).with_columns(pl.lit(OVERALL).alias("category"))
    checkpoint_rank = pl.col("checkpoint").replace_strict(
        {name: rank for rank, name in enumerate(CHECKPOINTS)}, default=len(CHECKPOINTS), return_dtype=pl.Int64)
    other_keys = [key for key in keys if key != "checkpoint"]
    return pl.concat([by_category, overall.select(by_category.columns)]).sort(
        [checkpoint_rank, *other_keys, pl.col("category") == OVERALL, "category"])


# The share of graded samples that are right (Avg@k), over the rows of a group.
AVG_K = pl.when(pl.col("n").sum() > 0).then(pl.col("n_correct").sum() / pl.col("n").sum()).alias("avg_k")


def benchmark_table(per_problem: pl.DataFrame) -> pl.DataFrame:
    """Pass@1 (greedy) and Avg@k per checkpoint, evaluation set and category, over the graded answers."""
    aggregations = [
        pl.len().cast(pl.Int64).alias("n"),
        pl.col("greedy_correct").mean().alias("pass1"),
        AVG_K,
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
        AVG_K,
    ]
    return with_overall(per_problem.filter(pl.col("eval_set") == WEAK_SET), aggregations, ["checkpoint"])


def summary(weakness: pl.DataFrame, checkpoints: list[str], benchmarks: pl.DataFrame,
            ungraded: dict[str, int]) -> dict[str, Any]:
    """`weak_solved_<checkpoint>`: {"overall": share, "per_category": {category: share}} for each checkpoint (the
    greedy answer), `weak_avg_k_<checkpoint>` the same over the k samples, `n_weak`, and `ungraded`:
    {checkpoint: answers whose grading ran out of time}. With no weak problems the shares are None: there is
    nothing to mitigate. In the arith world also `weak_like_solved_<checkpoint>` and `weak_like_avg_k_<checkpoint>`,
    the same shares on fresh problems of the weak problems' families."""
    weak_like = benchmarks.filter(pl.col("eval_set") == WEAK_LIKE_SET)
    tables = [("weak_solved", weakness, "solved"), ("weak_avg_k", weakness, "avg_k"),
              *([("weak_like_solved", weak_like, "pass1"), ("weak_like_avg_k", weak_like, "avg_k")]
                if weak_like.height else [])]
    result: dict[str, Any] = {}
    for prefix, table, column in tables:
        for checkpoint in checkpoints:
            rows = table.filter(pl.col("checkpoint") == checkpoint)
            shares = dict(zip(rows["category"], rows[column], strict=True))
            result[f"{prefix}_{checkpoint}"] = {
                "overall": shares.pop(OVERALL, None),
                "per_category": dict(sorted(shares.items())),
            }
    overall = weakness.filter(pl.col("category") == OVERALL)
    result["n_weak"] = int(overall["n_weak"][0]) if overall.height else 0
    result["ungraded"] = {checkpoint: ungraded.get(checkpoint, 0) for checkpoint in checkpoints}
    return result


def standard_errors(per_problem: pl.DataFrame, checkpoints: list[str]) -> dict[str, Any]:
    """`standard_errors`: {set: {checkpoint or DIFFERENCE: {pass1, avg_k}}} for the weak problems and `weak_like`,
    in shares. A checkpoint's is the error of its mean over the set's problems; the difference's is paired,
    problem by problem, as both policies answer the same problems."""
    result: dict[str, Any] = {}
    for eval_set in SET_SHARES:
        scores = {checkpoint: per_problem_scores(per_problem, eval_set, checkpoint) for checkpoint in checkpoints}
        if not any(table.height for table in scores.values()):
            continue
        errors = {checkpoint: {measure: mean_error(table[measure]) for measure in ("pass1", "avg_k")}
                  for checkpoint, table in scores.items()}
        ahead, behind = arms.HEADLINE
        if {ahead, behind} <= set(scores):
            paired = scores[ahead].join(scores[behind], on="problem_id", suffix="_behind")
            errors[DIFFERENCE] = {
                measure: mean_error(paired[measure] - paired[f"{measure}_behind"]) for measure in ("pass1", "avg_k")}
        result[eval_set] = errors
    return {"standard_errors": result} if result else {}


def benchmark_summary(benchmarks: pl.DataFrame, sets: list[EvalSet]) -> dict[str, Any]:
    """`benchmarks`: {checkpoint: {benchmark: {n, k, pass1, avg_k}, ..., "average": {pass1, avg_k}}}, the
    average being the unweighted mean over the benchmarks (as the paper averages its eight)."""
    overall = benchmarks.filter(pl.col("category") == OVERALL)
    k_of = {eval_set.name: eval_set.k for eval_set in sets}
    result: dict[str, Any] = {}
    for checkpoint in overall["checkpoint"].unique(maintain_order=True):
        rows = overall.filter((pl.col("checkpoint") == checkpoint) & pl.col("eval_set").is_in(list(k_of)))
        if rows.height == 0:
            continue
        per_set = {name: {"n": n, "k": k_of[name], "pass1": pass1, "avg_k": avg_k}
                   for name, n, pass1, avg_k in rows.select("eval_set", "n", "pass1", "avg_k").iter_rows()}
        per_set["average"] = {"pass1": rows["pass1"].mean(), "avg_k": rows["avg_k"].mean()}
        result[checkpoint] = per_set
    return {"benchmarks": result} if result else {}


def held_out_summary(per_problem: pl.DataFrame, names: list[str], training: pl.DataFrame) -> dict[str, Any]:
    """`held_out`: {set: {n, overlap}}: each held-out set's size and how many of its problems a training table
    holds (0, by construction; recomputable from eval/problems.parquet and the training tables)."""
    result = {}
    for name in names:
        problems = per_problem.filter(pl.col("eval_set") == name).unique("problem_id").select("problem")
        result[name] = {"n": problems.height, "overlap": held_out.overlap(problems, training).height}
    return {"held_out": result} if result else {}


# ---------------------------------------------------------------- stages


def evaluation_sets(cfg: PipelineConfig, config_file: Path, problems: pl.DataFrame, weakness: pl.DataFrame,
                    training: pl.DataFrame) -> list[EvalSet]:
    """Every set to evaluate on, none of its held-out ones holding a training problem (`training`:
    `held_out.training_problems`); a benchmark that holds one is refused."""
    world = get_world(cfg.world)
    trained_on = set(training["key"])  # every training problem's problem_key: world-drawn sets avoid them
    sets = [*heldout_sets(cfg, config_file, problems, training, trained_on),
            EvalSet(WEAK_SET, weak_problems(problems, weakness), cfg.eval.weak_k)]
    weak_like = world.weak_like_set(cfg, problems, weakness, trained_on)
    if weak_like is not None:
        sets.append(EvalSet(WEAK_LIKE_SET, held_out.without_training(weak_like, training), cfg.eval.k,
                            held_out=True))
    if cfg.eval.seed_set:
        sets.append(EvalSet(SEED_SET, problems.select("problem_id", "problem", "answer", "category"), cfg.eval.k))
    return [eval_set for eval_set in sets if eval_set.problems.height]


def training_problems(context: StageContext) -> pl.DataFrame:
    """Every problem of the arms' training sets the run holds (`held_out.training_problems`)."""
    return held_out.training_problems({name: context.tables[name] for name in arms.training_sets()
                                       if name in context.tables})


def sets_settings(cfg: PipelineConfig, options: dict) -> dict[str, Any]:
    return {"eval": cfg.eval.model_dump(mode="json", include={"benchmarks", "k", "weak_k", "seed_set"}),
            "world": cfg.world, "seed": cfg.seed, **get_world(cfg.world).eval_identity(cfg),
            "held_out_without_training": True}


def benchmark_files(cfg: PipelineConfig, run: RunDir) -> list[Path]:
    return [Path(entry.file) for entry in held_out.benchmark_entries(cfg) if entry.file is not None]


def choose_sets(context: StageContext) -> StageOutput:
    """`eval/sets`: the problems every checkpoint is evaluated on."""
    sets = evaluation_sets(context.cfg, context.run.config, context.table("problems"), context.table("weakness"),
                           training_problems(context))
    return StageOutput(tables={SETS: sets_table(sets)},
                       info={"sets": {eval_set.name: eval_set.k for eval_set in sets}})


EVAL_SETS = Stage(
    "eval-sets", "The problems sws eval samples every checkpoint on.", choose_sets, reads=("problems", "weakness"),
    optional_reads=tuple(name for name in arms.training_sets() if name != "problems"), writes=(SETS,),
    settings=sets_settings, input_files=benchmark_files, section="eval", command="sws eval", in_run=False)


def part(checkpoint: str) -> str:
    """The table of checkpoint `checkpoint`'s answers."""
    return f"eval/parts/{checkpoint}"


def part_settings(cfg: PipelineConfig, options: dict) -> dict[str, Any]:
    return {"eval": cfg.eval.model_dump(mode="json", exclude={"shard_size", "checkpoints"}), "world": cfg.world,
            "seed": cfg.seed, "policy": cfg.roles.policy.model_dump(mode="json"),
            **get_world(cfg.world).eval_identity(cfg)}


def checkpoint_files(checkpoint: str, cfg: PipelineConfig, run: RunDir) -> list[Path]:
    path = checkpoint_path(cfg, run, checkpoint)
    return [path] if path is not None and path.exists() else []


def evaluate_part(checkpoint: str, context: StageContext) -> StageOutput:
    """One checkpoint's answers on every set."""
    path = checkpoint_path(context.cfg, context.run, checkpoint)
    if path is None:
        raise UserError(f"checkpoint '{checkpoint}': not found; train it, then rerun `sws eval --run {context.run.root}`")
    ui.info(f"eval: {checkpoint} ({path})")
    table = evaluate_checkpoint(context.cfg, context.executor, checkpoint, path, sets_of(context.table(SETS)))
    ungraded = ungraded_answers(table).get(checkpoint, 0)
    if ungraded:
        ui.info(f"eval: {ungraded} of {checkpoint}'s answers ran out of grading time (grading.deadline_s); "
                "the shares leave them out")
    return StageOutput(tables={part(checkpoint): table}, info={"ungraded": ungraded})


PARTS = {checkpoint: Stage(
    f"eval-{checkpoint}", f"Sample and grade checkpoint {checkpoint} on every evaluation set.",
    functools.partial(evaluate_part, checkpoint), reads=(SETS,), writes=(part(checkpoint),), settings=part_settings,
    input_files=functools.partial(checkpoint_files, checkpoint), section="eval", uses_executor=True, float_results=True,
    command="sws eval", in_run=False) for checkpoint in CHECKPOINTS}


def summary_file(cfg: PipelineConfig, run: RunDir, options: dict) -> list[Path]:
    return [run.summary]


def summarize(context: StageContext) -> StageOutput:
    """The checkpoints' answers together, their aggregates and the headline (summary.json)."""
    checkpoints = context.options["checkpoints"]
    sets = sets_of(context.table(SETS))
    per_problem = pl.concat([context.table(part(checkpoint)) for checkpoint in checkpoints])
    benchmarks = benchmark_table(per_problem)
    weakness_solved = weakness_table(per_problem)
    headline = summary(weakness_solved, checkpoints, benchmarks, ungraded_answers(per_problem))
    headline |= benchmark_summary(benchmarks, [eval_set for eval_set in sets if eval_set.benchmark])
    headline |= standard_errors(per_problem, checkpoints)
    headline |= held_out_summary(per_problem, [eval_set.name for eval_set in sets if eval_set.held_out],
                                 training_problems(context))
    text = json_text({**headline, "environment": environment()})
    return StageOutput(
        tables={"eval/problems": per_problem, "eval/benchmarks": benchmarks, "eval/weakness": weakness_solved},
        files={context.run.summary: lambda path: path.write_text(text)}, info={"checkpoints": checkpoints})


SUMMARY = Stage(
    STEP, "The checkpoints' answers together, Pass@1 and Avg@k, weakness mitigation and summary.json.", summarize,
    reads=(SETS,), optional_reads=arms.training_sets(),
    more_optional_reads=lambda cfg, adapt_round: tuple(part(checkpoint) for checkpoint in cfg.eval.checkpoints),
    writes=("eval/problems", "eval/benchmarks", "eval/weakness"),
    settings=lambda cfg, options: {"checkpoints": options["checkpoints"]}, output_files=summary_file,
    section="eval", command="sws eval", in_run=False)


def evaluate(cfg: PipelineConfig, run_dir: Path, force: bool = False) -> StageResult:
    """The sets, then each checkpoint that exists, then the aggregates; each stage skipped when current."""
    run = RunDir(run_dir)
    held_out.check_settings(cfg, run.config)
    runner.run(EVAL_SETS, cfg, run_dir, force)
    checkpoints = present_checkpoints(cfg, run)
    if not checkpoints:
        raise UserError(f"{run.root / 'train'}: no checkpoint to evaluate; run `sws train initial --run {run.root}` "
                        "first")
    for checkpoint in checkpoints:
        runner.run(PARTS[checkpoint], cfg, run_dir, force)
    return runner.run(SUMMARY, cfg, run_dir, force, checkpoints=list(checkpoints))


STAGE = Stage(
    STEP, "Pass@1 and Avg@k of every checkpoint, and the share of the run's weak problems each now solves.",
    drive=evaluate, reads=("problems", "weakness"), writes=("eval/problems", "eval/benchmarks", "eval/weakness"),
    section="eval", uses_executor=True, command="sws eval")
DECLARED = (STAGE,)
