"""`sws select --pool FILE`: weakness-driven selection (the SwS paper's §4.3): instead of writing new problems,
take the pool problems nearest to the run's weak ones, under the synthesis budget's split by fail ratio.

Reads the pool through `sws prepare`'s reader and schema (a JSON list, JSONL or Parquet file; fields as
`prepare`'s options name them, else the usual names; with `prepare.categorize`, the categorizer labels the pool
rows without a category), `weakness.parquet`, `categories.parquet` and `problems.parquet`; writes
`selected.parquet` (problem_id, problem, answer, category, source = `sel/<pool>`, distance, nearest_weak_id) and
`selected.rejected.parquet`. Without `select.pool` the world draws the pool into the run (arith: `pool/arith.jsonl`,
fresh problems of every family). With `select.arm`, `sws run` runs it after the band filter.

Per category with weak problems, `select.budget` (empty: `mix.dose`, else as many as the band filter kept, so selection adds as many
problems as synthesis) is split by `share` (the largest-remainder rule synthesis uses);
each pool problem's distance is the cosine distance of its embedding (the run's embedder) to the nearest weak
problem of its category, and the nearest come first, each at most once. The pool is embedded `POOL_CHUNK` rows at
a time (each chunk cached under `cache/embeddings/`), so a pool of a million problems never has a million
embeddings in memory: per row only its distance and nearest weak problem are kept.

Rejected, with a reason: a pool problem that duplicates a seed or reference (benchmark) problem by the rule
generate uses (`reference_index`), the reasons `prepare` rejects rows for (an empty problem, a repeated one...),
one of a category without weak problems (`category_without_weakness`), one past its category's budget
(`beyond_budget`), and with `select.band` (on by default, so selection and synthesis add problems of the same
band) one the initial policy solves too rarely or too often (the band of `sws filter`, `filter.band`): then the
nearest problems are scored in order until the category's budget is filled with problems in the band.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np
import polars as pl

from sws import runner, ui
from sws.budget import largest_remainder
from sws.categorize import Categorizer
from sws.config import EngineConfig, PipelineConfig, with_overrides
from sws.decontamination import benchmark_problems
from sws.embeddings import chunk_cache_dir, embed_in_chunks, embed_texts
from sws.errors import UserError
from sws.executors import Executor
from sws.manifests import StageResult
from sws.pinned_threads import pinned_threads
from sws.policy import policy_role
from sws.records import normalize_records
from sws.run_dir import RunDir
from sws.runner import StageContext, StageOutput
from sws.stage import Option, Stage
from sws.stages.generate import near_duplicate_index
from sws.stages.prepare import categorizer_identity
from sws.tables import STR, read_records
from sws.world import get_world

STEP = "select"
PROBLEM_COLUMNS = ("problem_id", "problem", "answer", "category", "source")
SELECTED_SCHEMA = {**dict.fromkeys(PROBLEM_COLUMNS, STR), "distance": pl.Float64, "nearest_weak_id": STR}
# Pool rows embedded (and cached) together: what sits in memory of a pool's embeddings at any time.
POOL_CHUNK = 4096
ChunkEmbedder = Callable[[list[str]], Iterable[np.ndarray]]
# (ranked candidates, quota) -> (the rows taken, the others with a reject_reason).
Taker = Callable[[pl.DataFrame, int], tuple[pl.DataFrame, pl.DataFrame]]


def category_budgets(categories: pl.DataFrame, budget: int) -> dict[str, int]:
    """`budget` split by `share` over the categories with weak problems."""
    shares = {category: share for category, share in categories.select("category", "share").iter_rows() if share > 0}
    return largest_remainder(shares, budget) if shares else {}


def nearest_weak(chunks: Iterable[np.ndarray], weak: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per pool row, chunk by chunk: the cosine distance to its nearest weak problem (rows are L2-normalised), and
    that one's row in `weak`."""
    import torch

    distances, nearest = [np.zeros(0, np.float32)], [np.zeros(0, np.int64)]
    for chunk in chunks:
        with pinned_threads():  # the product's last bits would depend on the thread count
            similarity = (torch.from_numpy(np.ascontiguousarray(chunk, np.float32))
                          @ torch.from_numpy(np.ascontiguousarray(weak, np.float32)).T).numpy()
        index = similarity.argmax(axis=1)
        distances.append(1.0 - similarity[np.arange(len(chunk)), index])
        nearest.append(index)
    return np.concatenate(distances), np.concatenate(nearest)


def take_first(ranked: pl.DataFrame, quota: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The first `quota` rows, and the others rejected as `beyond_budget`."""
    return ranked.head(quota), ranked.slice(quota).with_columns(reject_reason=pl.lit("beyond_budget"))


def select(pool: pl.DataFrame, weak: pl.DataFrame, budgets: dict[str, int], embed_weak: Callable[[list[str]], np.ndarray],
           embed_pool: ChunkEmbedder, take: Taker = take_first) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The nearest pool problems per category under its budget (`take` picks them from the nearest first), and the
    rows it did not take (with their distance and reason)."""
    selected, beyond = [], []
    for category, quota in budgets.items():
        candidates = pool.filter(pl.col("category") == category)
        weak_here = weak.filter(pl.col("category") == category)
        if candidates.height == 0 or weak_here.height == 0:
            continue
        distances, nearest = nearest_weak(embed_pool(candidates["problem"].to_list()),
                                          embed_weak(weak_here["problem"].to_list()))
        ranked = candidates.with_columns(pl.Series("distance", distances.astype(np.float64)),
                                         pl.Series("nearest_weak_id", weak_here["problem_id"].gather(nearest),
                                                   dtype=STR))
        ranked = ranked.with_row_index("position").sort(["distance", "position"]).drop("position")
        taken, left = take(ranked, quota)
        selected.append(taken.select(*SELECTED_SCHEMA))
        beyond.append(left)
    kept = pl.concat(selected) if selected else pl.DataFrame(schema=SELECTED_SCHEMA)
    return kept, pl.concat(beyond, how="diagonal_relaxed") if beyond else pl.DataFrame()


def not_duplicates(cfg: PipelineConfig, problems: pl.DataFrame, pool: pl.DataFrame
                   ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The pool rows that duplicate no seed or reference problem, and the others with the reason. Repeats within
    the pool were already rejected by `prepare`'s rule, so the pool itself is not indexed."""
    duplicates = near_duplicate_index(cfg, problems, benchmark_problems(cfg))
    reasons = []
    for problem in pool["problem"]:
        match = duplicates.find(problem)
        reasons.append(None if match is None else f"duplicate_of_{match.split(':', 1)[0]}")
    marked = pool.with_columns(reject_reason=pl.Series(reasons, dtype=STR))
    return (marked.filter(pl.col("reject_reason").is_null()).drop("reject_reason"),
            marked.filter(pl.col("reject_reason").is_not_null()))


def fill_in_band(cfg: PipelineConfig, executor: Executor, policy: EngineConfig) -> Taker:
    """`select.band`: take ranked rows in order until `quota` of them lie in the band of `sws filter` under the
    initial policy (scoring only as many as it takes: the next `quota - taken` each time), so a band-filtered
    selection adds as many problems as an unfiltered one while the pool lasts. The scored rows outside the band
    are rejected with the reason; the rows never scored as `beyond_budget`."""
    def take(ranked: pl.DataFrame, quota: int) -> tuple[pl.DataFrame, pl.DataFrame]:
        kept, rejected, start = [], [], 0
        while start < ranked.height and sum(frame.height for frame in kept) < quota:
            wave = ranked.slice(start, quota - sum(frame.height for frame in kept))
            fits, out = in_band(cfg, executor, policy, wave)
            kept.append(fits)
            rejected.append(out)
            start += wave.height
        _, beyond = take_first(ranked, start)
        return (pl.concat(kept) if kept else ranked.clear(),
                pl.concat([*rejected, beyond], how="diagonal_relaxed"))
    return take


def in_band(cfg: PipelineConfig, executor: Executor, policy: EngineConfig, selected: pl.DataFrame
            ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The problems whose accuracy under the initial policy lies in `filter.band`, as `sws filter` keeps synthetic
    ones; the others with the reason."""
    from sws.stages.filter import BAND_TOLERANCE
    from sws.stages.score import policy_graded_counts

    low, high = cfg.filter.band
    counts = policy_graded_counts(cfg, executor, policy, selected.rename({"problem_id": "syn_id"}))
    accuracy = pl.Series("accuracy", [n_correct / n if n else None for n, n_correct in counts], dtype=pl.Float64)
    scored = selected.with_columns(accuracy)
    fits = pl.col("accuracy").is_between(low - BAND_TOLERANCE, high + BAND_TOLERANCE).fill_null(False)
    rejected = scored.filter(~fits).with_columns(
        reject_reason=pl.when(pl.col("accuracy").is_null()).then(pl.lit("ungraded"))
        .when(pl.col("accuracy") < low).then(pl.lit(f"too hard: accuracy below {low:g}"))
        .otherwise(pl.lit(f"too easy: accuracy above {high:g}")))
    return scored.filter(fits).drop("accuracy"), rejected


def pool_file(cfg: PipelineConfig, run_dir: Path, force: bool) -> Path:
    """`select.pool`, else the pool the world draws into the run (a step of the world's)."""
    if cfg.select.pool is None:
        drawn = get_world(cfg.world).selection_pool(cfg, run_dir, force)
        if drawn is None:
            raise UserError(f"select.pool: no pool given, and world '{cfg.world}' draws none; pass --pool FILE (a "
                            "JSON list, JSONL or Parquet file of problems)")
        return drawn
    pool_path = Path(cfg.select.pool)
    if not pool_path.is_file():
        raise UserError(f"{pool_path}: file not found (select.pool); pass a JSON list, JSONL or Parquet file")
    return pool_path


def run(cfg: PipelineConfig, run_dir: Path, force: bool = False) -> StageResult:
    """Select from `select.pool`, or from the pool the world draws first."""
    pool = pool_file(cfg, run_dir, force)
    return runner.run_stage(FROM_POOL, with_overrides(cfg, {"select.pool": str(pool)}), run_dir, force)


def budget_tables(cfg: PipelineConfig, adapt_round: int) -> tuple[str, ...]:
    """Without `select.budget` or `mix.dose`, the band filter's kept problems set it."""
    return ("filtered",) if cfg.select.budget is None and cfg.mix.dose is None else ()


def inputs(cfg: PipelineConfig, run: RunDir) -> list[Path]:
    """The pool, and with `select.band` the policy whose accuracies decide the band."""
    files = [Path(cfg.select.pool)]
    if cfg.select.band:
        policy = Path(policy_role(cfg, run.root).model)
        files += [policy] if policy.is_dir() else []
    return files


def settings(cfg: PipelineConfig, options: dict) -> dict:
    band = {"band": list(cfg.filter.band), "filter": cfg.filter.model_dump(mode="json", exclude={"shard_size"}),
            "policy": cfg.roles.policy.model_dump(mode="json"), "temperature": cfg.train.temperature}
    return {"select": cfg.select.model_dump(mode="json"), "dose": cfg.mix.dose,
            "prepare": cfg.prepare.model_dump(mode="json", exclude={"input", "preset"}),
            "embedder": cfg.roles.embedder.model, "references": cfg.synthesize.reference_files,
            **categorizer_identity(cfg), **(band if cfg.select.band else {})}


def taker(context: StageContext) -> Taker:
    """How a selection takes its quota from ranked rows: in the band (`select.band`), or the first ones."""
    if not context.cfg.select.band:
        return take_first
    return fill_in_band(context.cfg, context.executor, policy_role(context.cfg, context.run.root))


def read_pool(context: StageContext) -> tuple[pl.DataFrame, pl.DataFrame, Categorizer | None]:
    """The pool (`select.pool`) as problems with their `sel/<pool>` source, the rows `prepare`'s rules reject, and
    the categorizer that labelled it (with `prepare.categorize`)."""
    cfg = context.cfg
    pool_path = Path(cfg.select.pool)
    categorizer = Categorizer(cfg, context.executor, "label pool categories") if cfg.prepare.categorize else None
    pool, rejected = normalize_records(read_records(pool_path), pool_path, cfg.prepare, None, categorizer)
    return pool.with_columns(source=pl.lit(f"sel/{pool_path.stem}")), rejected, categorizer


def select_from_pool(context: StageContext) -> StageOutput:
    """The pool problems nearest to the weak ones, per category under its budget; the others with a reason."""
    cfg = context.cfg
    budget = next((each for each in (cfg.select.budget, cfg.mix.dose) if each is not None), None)
    budget = budget if budget is not None else context.table("filtered").height
    pool, rejected, categorizer = read_pool(context)
    problems = context.table("problems")
    fresh, duplicates = not_duplicates(cfg, problems, pool)
    budgets = category_budgets(context.table("categories"), budget)
    without_weakness = fresh.filter(~pl.col("category").is_in(list(budgets)))
    weak = problems.join(context.table("weakness").filter(pl.col("weak")).select("problem_id"), on="problem_id",
                         how="semi")
    run_dir = context.run.root  # for the embedding caches and the policy's checkpoint
    selected, beyond = select(
        fresh.filter(pl.col("category").is_in(list(budgets))), weak, budgets,
        lambda texts: embed_texts(texts, cfg.roles.embedder, run_dir),
        lambda texts: embed_in_chunks(texts, cfg.roles.embedder, chunk_cache_dir(run_dir, cfg.roles.embedder.model),
                                      POOL_CHUNK), taker(context))
    rejected_frame = pl.concat([
        rejected, duplicates,
        without_weakness.with_columns(reject_reason=pl.lit("category_without_weakness")), beyond,
    ], how="diagonal_relaxed")
    ui.info(f"{STEP}: {selected.height} of {pool.height + rejected.height} pool problems selected "
            f"(budget {budget}) -> selected.parquet")
    if without_weakness.height == fresh.height and fresh.height:
        ui.info(f"{STEP}: no pool problem is in a category with weak problems; if the pool has no categories, "
                "set prepare.categorize: true to label it")
    info = {"per_category": dict(Counter(selected["category"].to_list())), "budget": budget, "budgets": budgets,
            "rejected": dict(Counter(rejected_frame["reject_reason"].to_list()))}
    if categorizer is not None:
        info["categorize"] = categorizer.funnel().as_info()
    return StageOutput(tables={"selected": selected}, rejected={"selected": rejected_frame}, info=info)


FROM_POOL = Stage(
    STEP, "Take the pool problems nearest to the weak ones (the pool: select.pool).", select_from_pool,
    reads=("problems", "weakness", "categories"), more_reads=budget_tables, writes=("selected",),
    rejects=("selected",), settings=settings, input_files=inputs, section="select", float_results=True, in_run=False)
STAGE = Stage(
    STEP, "Take the pool problems nearest to the weak ones, per category under the fail-ratio budget (no "
    "generation).", drive=run, writes=("selected",), section="select",
    options=(Option("select.pool", "Pool of problems: a JSON list, JSONL or Parquet file; unset: the world's own "
                    "pool, if it draws one.", str, "--pool"),
             Option("select.budget", "Problems to select in all; unset: as many as the band filter kept.", int,
                    "--problems")),
    example="sws select --run runs/demo --pool pool.jsonl --problems 100", runs_when=lambda cfg: cfg.select.arm)
DECLARED = (STAGE,)
