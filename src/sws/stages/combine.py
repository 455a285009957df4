"""`sws synthesize --steps combine`: sample concept sets per category under the synthesis budget.

Reads `concepts.parquet` and `categories.parquet`; writes `concept_sets.parquet` (set_id, category, concepts,
level). The budget N is split over the categories that have extracted concepts, in proportion to their `share`,
by largest remainder; each category's sets come from `sws.concept_sampling` with a generator seeded by the run
seed and the category name. A category whose few concepts cannot supply its quota of distinct sets repeats
its sets, in the order drawn, up to `synthesize.max_problems_per_set` times each (every repeat is its own set_id,
so the generator gets a new request seed and writes another problem; `generate` drops repeats that come out
the same); what is still missing is counted in the funnel as `duplicate_set`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import polars as pl

from sws import ui
from sws.artifacts import StageResult, empty_table, read_table, run_stage, table_path, write_table
from sws.budget import largest_remainder
from sws.concept_sampling import SampledSet, SamplerSettings, build_graph, sample_concept_sets
from sws.config import PipelineConfig
from sws.embeddings import embed_texts
from sws.errors import UserError
from sws.funnel import funnel_row
from sws.llm_calls import request_seed

STEP = "combine"


def set_id(category: str, concepts: tuple[str, ...], level: str, repeat: int = 0) -> str:
    key = "\x1f".join([category, level, *sorted(concepts), *([f"repeat {repeat}"] if repeat else [])])
    return "set-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def with_repeats(sets: list[SampledSet], quota: int, max_per_set: int) -> list[tuple[SampledSet, int]]:
    """(set, repeat index) pairs: every distinct set once, then again in the order drawn, until `quota`."""
    rounds = min(max_per_set, -(-quota // len(sets))) if sets else 0
    return [(drawn, repeat) for repeat in range(rounds) for drawn in sets][:quota]


def category_budgets(concepts: pl.DataFrame, categories: pl.DataFrame, budget: int, source: Path) -> dict[str, int]:
    """Sets per category: `budget` split by `share` over the categories that have concepts."""
    with_concepts = sorted(set(concepts["category"].to_list()))
    shares = dict(zip(categories["category"].to_list(), categories["share"].to_list(), strict=True))
    missing = [category for category in with_concepts if category not in shares]
    if missing:
        raise UserError(f"{source}: no row for category '{missing[0]}' of concepts.parquet; "
                        "rerun `sws identify` and then `sws synthesize --steps extract`")
    wanted = {category: float(shares[category]) for category in with_concepts}
    if wanted and budget > 0 and not any(share > 0 for share in wanted.values()):
        raise UserError(f"{source}: column 'share' is 0 for every category with weak problems; rerun `sws identify`")
    return largest_remainder(wanted, budget) if wanted else {}


def run(cfg: PipelineConfig, run_dir: Path, force: bool = False) -> StageResult:
    run_dir = Path(run_dir)
    synth = cfg.synthesize
    return run_stage(
        run_dir, STEP,
        config={
            "seed": cfg.seed, "budget": synth.budget, "set_size": synth.set_size,
            "temperature": synth.temperature, "cooc_weight": synth.cooc_weight, "sim_weight": synth.sim_weight,
            "levels": synth.levels, "max_problems_per_set": synth.max_problems_per_set,
            "embedder": cfg.roles.embedder.model,
        },
        inputs=[table_path(run_dir, "concepts"), table_path(run_dir, "categories")],
        outputs=[table_path(run_dir, "concept_sets")],
        body=lambda: _combine(cfg, run_dir),
        force=force,
    )


def _combine(cfg: PipelineConfig, run_dir: Path) -> StageResult:
    synth = cfg.synthesize
    concepts = read_table(run_dir, "concepts")
    categories = read_table(run_dir, "categories")
    budgets = category_budgets(concepts, categories, synth.budget, table_path(run_dir, "categories"))
    if concepts.height == 0:
        ui.info(f"{STEP}: {table_path(run_dir, 'concepts')} is empty; no concept sets to sample")
    distinct = sorted({concept for listed in concepts["concepts"].to_list() for concept in listed})
    vectors = embed_texts(distinct, cfg.roles.embedder, run_dir) if distinct else np.zeros((0, 1))
    embedding_of = dict(zip(distinct, vectors, strict=True))
    settings = SamplerSettings(synth.set_size, synth.temperature, synth.cooc_weight, synth.sim_weight)
    rows, made, duplicates_drawn = [], {}, {}
    for category, quota in budgets.items():
        listed = concepts.filter(pl.col("category") == category)["concepts"].to_list()
        graph = build_graph(listed, embedding_of)
        rng = np.random.default_rng([cfg.seed, request_seed(0, STEP, category)])
        sets, duplicates_drawn[category] = sample_concept_sets(graph, quota, settings, synth.levels, rng)
        made[category] = len(sets)
        rows.extend({"set_id": set_id(category, drawn.concepts, drawn.level, repeat), "category": category,
                     "concepts": list(drawn.concepts), "level": drawn.level}
                    for drawn, repeat in with_repeats(sets, quota, synth.max_problems_per_set))
    write_table(run_dir, "concept_sets", pl.DataFrame(rows, schema=empty_table("concept_sets").schema))
    planned = sum(budgets.values())
    row = funnel_row(STEP, planned, len(rows), ["duplicate_set"] * (planned - len(rows)))
    return StageResult(STEP, rows={"concept_sets": len(rows)}, info={
        "funnel": row.as_info(), "budget": budgets, "sets": made, "duplicate_draws": duplicates_drawn,
    })
