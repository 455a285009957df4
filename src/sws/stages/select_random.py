"""`sws select-random`: the random-selection control of the SwS paper (§4.3, random selection from the pool).

With `select.random_arm`, after `sws select`: as many pool problems as the weakness-driven selection took
(`selected.parquet`), drawn in a random order of the whole pool (the run's seed, whatever their category), taken
as `sws select` takes its nearest ones (`select.band`: in the band of `sws filter`, the next drawn instead of one
outside it), so the two selection arms differ only in what picks the problems. Writes `random_selected.parquet`
(the columns of `selected.parquet`; `distance` and `nearest_weak_id` empty) and its rejected rows, then
`sws mix-random-selected` writes `random_selected_mix.parquet` (seed ∪ random_selected, mixed as augmented is), the
training set of the arm `random_selected`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import polars as pl

from sws import runner, ui
from sws.config import PipelineConfig, with_overrides
from sws.manifests import StageResult
from sws.runner import StageContext, StageOutput
from sws.stage import Stage
from sws.stages import mix
from sws.stages.select import SELECTED_SCHEMA, inputs, not_duplicates, pool_file, read_pool, taker
from sws.stages.select import settings as select_settings

STEP = "select_random"
MIX_STEP = "mix_random_selected"


def random_order(pool: pl.DataFrame, seed: int) -> pl.DataFrame:
    """The pool rows in a random order that only `seed` and the rows decide."""
    return pool.sample(fraction=1.0, shuffle=True, seed=seed)


def select_at_random(context: StageContext) -> StageOutput:
    """As many pool problems as `selected` holds, in a random order of the pool; the others with a reason."""
    cfg = context.cfg
    quota = context.table("selected").height
    pool, rejected, _ = read_pool(context)
    fresh, duplicates = not_duplicates(cfg, context.table("problems"), pool)
    drawn = random_order(fresh, cfg.seed).with_columns(distance=pl.lit(None, dtype=pl.Float64),
                                                       nearest_weak_id=pl.lit(None, dtype=pl.Utf8))
    taken, left = taker(context)(drawn, quota)
    taken = taken.select(*SELECTED_SCHEMA)
    rejected_frame = pl.concat([rejected, duplicates, left], how="diagonal_relaxed")
    ui.info(f"{STEP}: {taken.height} pool problems drawn at random (as many as selected.parquet's {quota}) "
            "-> random_selected.parquet")
    return StageOutput(tables={"random_selected": taken}, rejected={"random_selected": rejected_frame},
                       info={"per_category": dict(Counter(taken["category"].to_list())), "budget": quota,
                             "rejected": dict(Counter(rejected_frame["reject_reason"].to_list()))})


def run(cfg: PipelineConfig, run_dir: Path, force: bool = False) -> StageResult:
    """Draw from `select.pool`, or from the pool the world draws first (the one `sws select` read)."""
    pool = pool_file(cfg, run_dir, force)
    return runner.run_stage(FROM_POOL, with_overrides(cfg, {"select.pool": str(pool)}), run_dir, force)


def mix_random_selected(context: StageContext) -> StageOutput:
    """The random_selected arm's training set: seed ∪ random_selected, by the rule of augmented."""
    return mix.build(context, MIX_STEP, "random_selected_mix", ["random_selected"])


def is_on(cfg: PipelineConfig) -> bool:
    return cfg.select.random_arm


FROM_POOL = Stage(
    STEP, "Draw as many pool problems at random as `sws select` took (select.pool).", select_at_random,
    reads=("problems", "selected"), writes=("random_selected",), rejects=("random_selected",),
    settings=lambda cfg, options: {**select_settings(cfg, options), "seed": cfg.seed}, input_files=inputs,
    section="select", in_run=False)
DECLARED = (
    Stage(STEP, "The random-selection control: as many pool problems as `sws select` took, drawn at random "
          "(select.random_arm).", drive=run, writes=("random_selected",), section="select", runs_when=is_on,
          title="select at random", example="sws select-random --run runs/demo"),
    Stage(MIX_STEP, "Build random_selected_mix.parquet: the seed problems plus the randomly drawn pool problems "
          "(select.random_arm).", mix_random_selected, reads=("problems", "random_selected"),
          writes=("random_selected_mix",), rejects=("random_selected_mix",), section="select",
          title="mix random selected", runs_when=is_on, example="sws mix-random-selected --run runs/demo"),
)
