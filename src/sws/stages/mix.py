"""`sws mix`: the augmented training set, seed problems ∪ the synthetic problems that passed every filter ∪ the
problems `sws select` took from a pool, as `mix.sources` says (default both; a source whose stage has not run is
left out). With `select.arm` it also writes `selected_mix.parquet`, seed ∪ selected by the same rule: the
training set of the selected arm, beside augmented (then seed ∪ synthetic) and the seed-only baseline.

Synthetic rows keep their `syn_id` as `problem_id` and get `source = "syn/<generator model>"`; selected rows keep
their id and `sel/<pool>` source. A new problem whose text repeats a seed problem (or an earlier new one), or
whose id is already taken, goes to `augmented.rejected.parquet` with its reason, so every id in the augmented set
is unique.
"""

from __future__ import annotations

import random
from collections import Counter

import polars as pl

from sws import ui
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.funnel import funnel_row
from sws.near_duplicates import problem_key
from sws.runner import StageContext, StageOutput
from sws.stage import Stage, producer_of
from sws.tables import SCHEMAS

STEP = "mix"
SELECTED_STEP = "mix_selected"

AUGMENTED_COLUMNS = list(SCHEMAS["augmented"])


def synthetic_source(cfg: PipelineConfig) -> str:
    return f"syn/{cfg.roles.generator.model}"


# The tables `mix.sources` names, each with the column that holds a row's id and its name in reject reasons.
ADDITIONS = {"synthetic": ("filtered", "syn_id"), "selected": ("selected", "problem_id"),
             "random_selected": ("random_selected", "problem_id"), "oracle_family": ("oracle_family", "problem_id")}


def mix(problems: pl.DataFrame, additions: dict[str, pl.DataFrame], synthetic_source: str, dose: int | None = None,
        dose_seed: int = 0) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return (augmented, rejected added rows with `reject_reason`): the seed problems, then each addition's rows
    that repeat neither a seed problem, nor an earlier row, nor a taken id (`problem_key` decides a repeat). With
    a `dose`, an addition with more such rows keeps `dose` of them drawn at random (`dose_seed`), in their order, and
    rejects the others as `beyond_dose`."""
    seed = problems.select(AUGMENTED_COLUMNS)
    seen_texts = {problem_key(text) for text in seed["problem"]}
    seed_texts = set(seen_texts)
    seen_ids = set(seed["problem_id"])
    kept, rejected = [], []
    for kind, table in additions.items():
        id_column = ADDITIONS[kind][1]
        rejected_here = []
        kept_here = []
        for row in table.iter_rows(named=True):
            text = problem_key(row["problem"])
            if text in seed_texts:
                rejected_here.append({**row, "reject_reason": "duplicate_of_seed"})
            elif text in seen_texts:
                rejected_here.append({**row, "reject_reason": f"duplicate_{kind}"})
            elif row[id_column] in seen_ids:
                rejected_here.append({**row, "reject_reason": "duplicate_id"})
            else:
                seen_texts.add(text)
                seen_ids.add(row[id_column])
                kept_here.append(row)
        if dose is not None and len(kept_here) > dose:
            chosen = set(random.Random(dose_seed).sample(range(len(kept_here)), dose))
            rejected_here += [{**row, "reject_reason": "beyond_dose"}
                              for index, row in enumerate(kept_here) if index not in chosen]
            kept_here = [row for index, row in enumerate(kept_here) if index in chosen]
        kept += [{"problem_id": row[id_column], "problem": row["problem"], "answer": row["answer"],
                  "category": row["category"], "source": synthetic_source if kind == "synthetic" else row["source"]}
                 for row in kept_here]
        rejected.append(pl.DataFrame(rejected_here, schema={**table.schema, "reject_reason": pl.Utf8}))
    added = pl.DataFrame(kept, schema=SCHEMAS["augmented"])
    rejected_rows = (pl.concat(rejected, how="diagonal_relaxed") if rejected
                     else pl.DataFrame(schema={"reject_reason": pl.Utf8}))
    return pl.concat([seed, added]), rejected_rows


def settings(cfg: PipelineConfig, options: dict) -> dict:
    return {"source": synthetic_source(cfg), "sources": cfg.mix.sources, "dose": cfg.mix.dose, "seed": cfg.seed}


def chosen_sources(cfg: PipelineConfig, adapt_round: int) -> tuple[str, ...]:
    """The tables `mix.sources` names."""
    return tuple(ADDITIONS[kind][0] for kind in cfg.mix.sources)


def mix_augmented(context: StageContext) -> StageOutput:
    """augmented: the seed problems with the sources of `mix.sources` that were written added."""
    kinds = [kind for kind in context.cfg.mix.sources if ADDITIONS[kind][0] in context.tables]
    if not kinds:
        first = ADDITIONS[context.cfg.mix.sources[0]][0]
        raise UserError(f"{context.source(first)}: not found; run `{producer_of(first)} --run {context.run.root}` "
                        "first")
    return build(context, STEP, "augmented", kinds)


def mix_selected(context: StageContext) -> StageOutput:
    """The selected arm's training set (`select.arm`): seed ∪ selected, by the same rule as augmented."""
    return build(context, SELECTED_STEP, "selected_mix", ["selected"])


def build(context: StageContext, step: str, table: str, kinds: list[str]) -> StageOutput:
    """`table` (+ its rejected rows): the seed problems with those of `kinds` added by `mix`."""
    problems = context.table("problems")
    additions = {kind: context.table(ADDITIONS[kind][0]) for kind in kinds}
    mixed, rejected = mix(problems, additions, synthetic_source(context.cfg), context.cfg.mix.dose,
                          context.cfg.seed)
    n_added = mixed.height - problems.height
    reasons = Counter(rejected["reject_reason"].to_list()) if rejected.height else {}
    ui.info(f"{step}: {problems.height} seed + {n_added} {' and '.join(kinds)} = {mixed.height} problems "
            f"({', '.join(f'{count} {reason}' for reason, count in sorted(reasons.items())) or 'none rejected'})")
    return StageOutput(
        tables={table: mixed}, rejected={table: rejected},
        funnel=funnel_row(step, sum(frame.height for frame in additions.values()), n_added,
                          rejected["reject_reason"]),
        info={"seed": problems.height, "added": n_added, "sources": kinds})


STAGE = Stage(
    STEP, "Build augmented.parquet: the seed problems plus the synthetic problems that passed every filter and the "
    "selected ones (mix.sources).", mix_augmented, reads=("problems",),
    # A source whose stage has not run is left out; with none written, the first is missing.
    more_optional_reads=chosen_sources, writes=("augmented",), rejects=("augmented",), settings=settings,
    section="mix", funnel=True, example="sws mix --run runs/demo")
SELECTED = Stage(
    SELECTED_STEP, "Build selected_mix.parquet, the selected arm's training set: the seed problems plus the "
    "selected ones (select.arm).", mix_selected, reads=("problems", "selected"), writes=("selected_mix",),
    rejects=("selected_mix",), section="select", title="mix selected", runs_when=lambda cfg: cfg.select.arm,
    example="sws mix-selected --run runs/demo")
DECLARED = (STAGE, SELECTED)
