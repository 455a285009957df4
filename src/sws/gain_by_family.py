"""Where the gain sits: each arm difference on the held-out fresh problems (`weak_like`) by category and by the
world's family tag (`World.family_of`), and how often each arm's training drew the weak problems.

A gain of two points overall can be ten points on one family and nothing on the rest; the breakdown shows which
(the report per run, `sws compare` as the mean over runs). The draws show what an arm's training set does to the
weak problems: a larger set draws each of them less often, so fewer updates act on them.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl

from sws import arms
from sws.config import load_config
from sws.run_dir import RunDir
from sws.tables import read_table
from sws.world import get_world

# The held-out set the breakdown reads, and the kinds of group it breaks it into.
EVAL_SET = "weak_like"
KINDS = ("category", "family")
EFFECT_SCHEMA = {"kind": pl.Utf8, "group": pl.Utf8, "n": pl.Int64, "ahead": pl.Utf8, "behind": pl.Utf8,
                 "ahead_avg_k": pl.Float64, "behind_avg_k": pl.Float64, "points": pl.Float64}
DRAW_SCHEMA = {"arm": pl.Utf8, "draws per weak problem": pl.Float64, "draws per problem trained on": pl.Float64,
               "weak problems never drawn": pl.Int64}


def effects(eval_problems: pl.DataFrame, family_of: Callable[[str], str | None]) -> pl.DataFrame:
    """Per category and per family of the `weak_like` problems, and per arm difference both arms of which were
    evaluated (`sws.arms.differences`): problems, each arm's Avg@k and ahead − behind in points."""
    held_out = eval_problems.filter(pl.col("eval_set") == EVAL_SET)
    if held_out.is_empty():
        return pl.DataFrame(schema=EFFECT_SCHEMA)
    families = {problem: family_of(problem) for problem in held_out["problem"].drop_nulls().unique().to_list()}
    tagged = held_out.with_columns(family=pl.col("problem").replace_strict(families, default=None,
                                                                           return_dtype=pl.Utf8))
    evaluated = set(tagged["checkpoint"])
    frames = []
    for kind in KINDS:
        per_group = (tagged.filter(pl.col(kind).is_not_null())
                     .group_by(kind, "checkpoint")
                     .agg(n=pl.col("problem_id").n_unique().cast(pl.Int64),
                          avg_k=pl.col("n_correct").sum() / pl.col("n").sum()))
        for ahead, behind in arms.differences():
            if not {ahead, behind} <= evaluated:
                continue
            pair = (per_group.filter(pl.col("checkpoint") == ahead).select(kind, "n", ahead_avg_k="avg_k")
                    .join(per_group.filter(pl.col("checkpoint") == behind).select(kind, behind_avg_k="avg_k"),
                          on=kind))
            frames.append(pair.select(
                pl.lit(kind).alias("kind"), pl.col(kind).alias("group"), "n", pl.lit(ahead).alias("ahead"),
                pl.lit(behind).alias("behind"), "ahead_avg_k", "behind_avg_k",
                points=100 * (pl.col("ahead_avg_k") - pl.col("behind_avg_k"))))
    if not frames:
        return pl.DataFrame(schema=EFFECT_SCHEMA)
    return pl.concat(frames).cast(EFFECT_SCHEMA).sort("kind", "ahead", "behind", "group")  # type: ignore[arg-type]


def weak_draws(rollouts: dict[str, pl.DataFrame], weak_ids: pl.Series) -> pl.DataFrame:
    """Per arm, from its rollout log: how many steps drew each weak problem into a batch on average, each problem
    it trained on, and how many weak problems it never drew (a policy this small learns the problems it trains on,
    so an arm that revisits them more solves more of them without learning more of the skill)."""
    weak = pl.DataFrame({"problem_id": weak_ids}, schema={"problem_id": pl.Utf8})
    rows = []
    for name, log in rollouts.items():
        draws = log.group_by("problem_id").agg(pl.col("step").n_unique().alias("draws"))
        per_weak = weak.join(draws, on="problem_id", how="left").fill_null(0)["draws"]
        rows.append({"arm": name, "draws per weak problem": per_weak.mean(),
                     "draws per problem trained on": draws["draws"].mean(),
                     "weak problems never drawn": int((per_weak == 0).sum())})
    return pl.DataFrame(rows, schema=DRAW_SCHEMA)


def run_breakdown(run_dir: Path) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`effects` and `weak_draws` of one evaluated run (its eval/problems, weakness and rollout logs); empty where
    the run has no eval/problems or weakness table."""
    run = RunDir(run_dir)
    if not (run.table("eval/problems").is_file() and run.table("weakness").is_file()):
        return pl.DataFrame(schema=EFFECT_SCHEMA), pl.DataFrame(schema=DRAW_SCHEMA)
    world = get_world(load_config(run.config, paths_relative_to_file=False).world) if run.config.is_file() else None
    found = effects(read_table(run.root, "eval/problems"), world.family_of if world else lambda problem: None)
    weak = read_table(run.root, "weakness").filter(pl.col("weak"))["problem_id"]
    logs = {arm.name: read_table(run.root, arm.rollouts) for arm in arms.continuing()
            if run.table(arm.rollouts).is_file()}
    return found, weak_draws(logs, weak)


def mean_effects(per_run: list[pl.DataFrame]) -> pl.DataFrame:
    """`effects` of several runs: per group and difference, the runs that measured it, the mean in points and
    its standard error over runs (None with one run)."""
    frames = [frame.with_columns(run=pl.lit(index)) for index, frame in enumerate(per_run) if frame.height]
    if not frames:
        return pl.DataFrame(schema={"kind": pl.Utf8, "group": pl.Utf8, "ahead": pl.Utf8, "behind": pl.Utf8,
                                    "runs": pl.UInt32, "n": pl.Int64, "points": pl.Float64, "sem": pl.Float64})
    return (pl.concat(frames).group_by("kind", "group", "ahead", "behind")
            .agg(runs=pl.len(), n=pl.col("n").sum(), points=pl.col("points").mean(),
                 sem=pl.col("points").std() / pl.len().sqrt())
            .sort("kind", "ahead", "behind", "group"))


def mean_draws(per_run: list[pl.DataFrame]) -> pl.DataFrame:
    """`weak_draws` of several runs: per arm, the mean of each column over the runs that trained it."""
    frames = [frame for frame in per_run if frame.height]
    if not frames:
        return pl.DataFrame(schema=DRAW_SCHEMA)
    order = {name: index for index, name in enumerate(arms.NAMES)}
    means = pl.concat(frames).group_by("arm").agg(pl.exclude("arm").mean())
    return means.sort(pl.col("arm").replace_strict(order, return_dtype=pl.Int64))


def concept_match(kept: dict[str, pl.DataFrame], weak_concepts: pl.DataFrame) -> pl.DataFrame:
    """Per synthesis (name -> its kept problems, with `category` and `concepts`): how many it kept, the share
    whose concepts all lie within one weak problem's (the extractor's, `concepts.parquet`), and the share whose
    concepts all lie within those of its category's weak problems. Targeted synthesis should follow the weak
    problems' concepts; untargeted synthesis follows them only as far as random problems share them."""
    per_problem = [(category, set(concepts)) for category, concepts in
                   weak_concepts.select("category", "concepts").iter_rows()]
    per_category: dict[str, set[str]] = {}
    for category, concepts in per_problem:
        per_category.setdefault(category, set()).update(concepts)
    rows = []
    for name, problems in kept.items():
        sets = [(category, set(concepts or [])) for category, concepts in
                problems.select("category", "concepts").iter_rows()]
        one = sum(any(wanted <= weak for category_of_weak, weak in per_problem if category_of_weak == category)
                  for category, wanted in sets)
        within = sum(wanted <= per_category.get(category, set()) for category, wanted in sets)
        rows.append({"synthesis": name, "kept": len(sets), "within one weak problem's concepts":
                     one / len(sets) if sets else None,
                     "within its category's weak concepts": within / len(sets) if sets else None})
    return pl.DataFrame(rows, schema={"synthesis": pl.Utf8, "kept": pl.Int64,
                                      "within one weak problem's concepts": pl.Float64,
                                      "within its category's weak concepts": pl.Float64})
