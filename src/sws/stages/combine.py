"""`sws synthesize --sub-steps combine`: sample concept sets per category under the synthesis budget.

Reads `concepts.parquet` and `categories.parquet`; writes `concept_sets.parquet` (set_id, category, concepts,
level, instance). The budget N is split over the categories that have extracted concepts, in proportion to their
`share`, by largest remainder; each category's sets come from `sws.concept_sampling` with a generator seeded by
the run seed and the category name.

With `synthesize.sampling: draws` (the default) a category's quota is that many independent draws from its concept
distribution: a set drawn k times is requested k times, as instances 0..k-1 (instance k ≥ 1: the generator's
prompt asks for variant k, with other numbers and wording), so what is requested follows the distribution. A set
has `synthesize.set_size` concepts, by default the median length of the category's weak problems' concept lists.
The manifest's `requested` gives per category the share of sets inside one weak problem's concept list and, where
the world knows what its categories can show, the share it can show.

With `sampling: distinct`, only distinct (concepts, level) sets are kept; a category whose few concepts cannot
supply its quota of them spends the rest of its share when `synthesize.fill_budget` is on (`fill_quota`): first its concept sets at the other levels of
`synthesize.levels`, then new *instances* of the sets so far, in turn (instance k ≥ 1: the generator's prompt
asks for variant k of the set, with other numbers and wording; `generate` drops instances that come out the same
as another problem). With it off (the paper's one problem per distinct set), the shortfall is counted in the
funnel as `duplicate_set`. The manifest's `spending` records, per category, how its budget was spent.
"""

from __future__ import annotations

import functools
import hashlib
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from sws import ui
from sws.budget import largest_remainder
from sws.concept_sampling import (
    SampledSet,
    SamplerSettings,
    build_graph,
    draw_concept_sets,
    sample_concept_sets,
)
from sws.config import PipelineConfig
from sws.embeddings import embed_texts
from sws.errors import UserError
from sws.funnel import funnel_row
from sws.llm_calls import request_seed
from sws.runner import StageContext, StageOutput
from sws.stage import Stage
from sws.tables import empty_table

STEP = "combine"


def set_id(category: str, concepts: tuple[str, ...], level: str, instance: int = 0) -> str:
    key = "\x1f".join([category, level, *sorted(concepts), *([f"instance {instance}"] if instance else [])])
    return "set-" + hashlib.sha256(key.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class PlannedSet:
    drawn: SampledSet
    instance: int  # 0: the set as drawn or level-filled; k >= 1: the generator is asked for variant k
    fill: str  # "distinct", "level" or "instance"


def fill_quota(sets: list[SampledSet], quota: int, levels: Sequence[str]) -> list[PlannedSet]:
    """The distinct sets as drawn, then their concepts at the levels not drawn yet (each level in turn over the
    concept sets), then instances 1, 2, ... of everything so far in that order, up to `quota` in all."""
    planned = [PlannedSet(drawn, 0, "distinct") for drawn in sets][:quota]
    concept_sets = list(dict.fromkeys(frozenset(drawn.concepts) for drawn in sets))
    order_of = {frozenset(drawn.concepts): drawn.concepts for drawn in reversed(sets)}
    seen = {(frozenset(drawn.concepts), drawn.level) for drawn in sets}
    for level in dict.fromkeys(levels):
        for concepts in concept_sets:
            if len(planned) < quota and (concepts, level) not in seen:
                seen.add((concepts, level))
                planned.append(PlannedSet(SampledSet(order_of[concepts], level), 0, "level"))
    each_once = list(planned)
    instance = 1
    while each_once and len(planned) < quota:
        planned.extend(PlannedSet(plan.drawn, instance, "instance") for plan in each_once[:quota - len(planned)])
        instance += 1
    return planned


def repeats_as_instances(drawn: list[SampledSet]) -> list[PlannedSet]:
    """The draws in order, each repeat of a (concepts, level) set an instance of its own (0 for its first draw)."""
    seen: Counter[tuple[frozenset[str], str]] = Counter()
    planned = []
    for each in drawn:
        key = (frozenset(each.concepts), each.level)
        planned.append(PlannedSet(each, seen[key], "distinct" if seen[key] == 0 else "instance"))
        seen[key] += 1
    return planned


def median_list_length(concept_lists: Sequence[Sequence[str]]) -> int:
    """The median number of distinct concepts a weak problem lists (at least 1)."""
    lengths = [len(set(listed)) for listed in concept_lists]
    return max(1, int(np.median(lengths))) if lengths else 1


def request_shares(sets: Sequence[Sequence[str]], concept_lists: Sequence[Sequence[str]],
                   shows: Callable[[Sequence[str]], bool | None]) -> dict[str, float | int | None]:
    """Of the requested sets (drawn from the lists' own strings): how many, the share inside one weak problem's
    concept list, and the share the category can show (`shows`; None when the world cannot say)."""
    lists = [set(listed) for listed in concept_lists]
    within = sum(any(set(concepts) <= listed for listed in lists) for concepts in sets)
    verdicts = [shows(concepts) for concepts in sets]
    shown = None if None in verdicts else sum(verdicts)
    return {"sets": len(sets), "within_one_weak_problem": within / len(sets) if sets else None,
            "showable": None if shown is None or not sets else shown / len(sets)}


def category_budgets(concepts: pl.DataFrame, categories: pl.DataFrame, budget: int, source: Path) -> dict[str, int]:
    """Sets per category: `budget` split by `share` over the categories that have concepts."""
    with_concepts = sorted(set(concepts["category"].to_list()))
    shares = dict(zip(categories["category"].to_list(), categories["share"].to_list(), strict=True))
    missing = [category for category in with_concepts if category not in shares]
    if missing:
        raise UserError(f"{source}: no row for category '{missing[0]}' of concepts.parquet; "
                        "rerun `sws identify` and then `sws synthesize --sub-steps extract`")
    wanted = {category: float(shares[category]) for category in with_concepts}
    if wanted and budget > 0 and not any(share > 0 for share in wanted.values()):
        raise UserError(f"{source}: column 'share' is 0 for every category with weak problems; rerun `sws identify`")
    return largest_remainder(wanted, budget) if wanted else {}


def settings(cfg: PipelineConfig, options: dict) -> dict[str, object]:
    """What decides the concept sets drawn from the concepts and categories."""
    synth = cfg.synthesize
    return {
        "seed": cfg.seed, "budget": synth.budget, "set_size": synth.set_size, "sampling": synth.sampling,
        "temperature": synth.temperature, "cooc_weight": synth.cooc_weight, "sim_weight": synth.sim_weight,
        "levels": synth.levels, "fill_budget": synth.fill_budget,
        "embedder": cfg.roles.embedder.model,
    }


def combine(context: StageContext) -> StageOutput:
    """The concept sets of the budget; the info says per category how its budget was spent."""
    cfg = context.cfg
    synth = cfg.synthesize
    concepts = context.table("concepts")
    budgets = category_budgets(concepts, context.table("categories"), synth.budget, context.source("categories"))
    if concepts.height == 0:
        ui.info(f"{STEP}: {context.source('concepts')} is empty; no concept sets to sample")
    distinct = sorted({concept for listed in concepts["concepts"].to_list() for concept in listed})
    vectors = embed_texts(distinct, cfg.roles.embedder, context.run.root) if distinct else np.zeros((0, 1))
    embedding_of = dict(zip(distinct, vectors, strict=True))
    rows, spending, duplicates_drawn, requested = [], {}, {}, {}
    for category, quota in budgets.items():
        listed = concepts.filter(pl.col("category") == category)["concepts"].to_list()
        graph = build_graph(listed, embedding_of)
        sampler = SamplerSettings(synth.set_size or median_list_length(listed), synth.temperature,
                                  synth.cooc_weight, synth.sim_weight)
        rng = np.random.default_rng([cfg.seed, request_seed(0, STEP, category)])
        if synth.sampling == "draws":
            planned = repeats_as_instances(draw_concept_sets(graph, quota, sampler, synth.levels, rng))
        else:
            sets, duplicates_drawn[category] = sample_concept_sets(graph, quota, sampler, synth.levels, rng)
            planned = fill_quota(sets, quota, synth.levels) if synth.fill_budget else fill_quota(sets, len(sets), [])
        fills = Counter(plan.fill for plan in planned)
        spending[category] = {"budget": quota, "set_size": sampler.set_size, "distinct": fills["distinct"],
                              "level_filled": fills["level"], "instance_filled": fills["instance"]}
        requested[category] = request_shares([plan.drawn.concepts for plan in planned], listed,
                                             functools.partial(context.world.category_shows, category))
        rows.extend({"set_id": set_id(category, plan.drawn.concepts, plan.drawn.level, plan.instance),
                     "category": category, "concepts": list(plan.drawn.concepts), "level": plan.drawn.level,
                     "instance": plan.instance}
                    for plan in planned)
    budgeted = sum(budgets.values())
    return StageOutput(tables={"concept_sets": pl.DataFrame(rows, schema=empty_table("concept_sets").schema)},
                       info={"spending": spending, "duplicate_draws": duplicates_drawn, "requested": requested},
                       funnel=funnel_row(STEP, budgeted, len(rows), ["duplicate_set"] * (budgeted - len(rows))))


STAGE = Stage(
    STEP, "Sample concept sets per category under the synthesis budget.", combine,
    reads=("concepts", "categories"), writes=("concept_sets",), settings=settings, section="synthesize",
    synthesis_step=True, funnel=True, command="sws synthesize --sub-steps combine", in_run=False)
DECLARED = (STAGE,)
