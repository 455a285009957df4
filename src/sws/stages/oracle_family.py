"""`sws oracle-family`: the upper-bound arms' training sets (`oracle_family.arm`).

The ideal targeted data: fresh problems of the weak problems' own families, drawn by the world one weak problem
in turn (as `weak_like` is drawn, from a seed stream of their own), none of them a seed problem. Writes
`oracle_family_mix.parquet` (seed ∪ the first n of them) and `oracle_family_large_mix.parquet` (seed ∪
`oracle_family.large_factor` × n), the training sets of the arms `oracle_family` and `oracle_family_large`. `sws
eval` leaves every training problem, and its commuted twin, out of the held-out sets, so these arms never train on
a problem they are measured on. The share of this arm's gain over the baseline that the synthetic arm recovers is
the method's efficiency; whether this arm beats the baseline at all is the instrument's range.
"""

from __future__ import annotations

import polars as pl

from sws import ui
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.runner import StageContext, StageOutput
from sws.stage import Stage
from sws.stages import mix

STEP = "oracle_family"
SOURCE = "oracle/family"
TABLES = ("oracle_family_mix", "oracle_family_large_mix")


def dose(cfg: PipelineConfig, filtered: pl.DataFrame | None) -> int:
    """Problems the smaller arm adds: `oracle_family.n`, else `mix.dose`, else as many as the band kept."""
    if cfg.oracle_family.n is not None:
        return cfg.oracle_family.n
    if cfg.mix.dose is not None:
        return cfg.mix.dose
    if filtered is None:
        raise UserError("oracle_family.n: not set, and no filtered.parquet to take the augmented arm's count from; "
                        "set oracle_family.n (or mix.dose), or run `sws filter` first")
    return filtered.height


def budget_tables(cfg: PipelineConfig, adapt_round: int) -> tuple[str, ...]:
    """Without a dose set, the band filter's kept problems set it."""
    return ("filtered",) if cfg.oracle_family.n is None and cfg.mix.dose is None else ()


def family_mixes(context: StageContext) -> StageOutput:
    cfg = context.cfg
    problems, weakness = context.table("problems"), context.table("weakness")
    n = dose(cfg, context.tables.get("filtered"))
    drawn = context.world.oracle_family_set(cfg, problems, weakness, n * cfg.oracle_family.large_factor)
    if drawn is None:
        raise UserError(f"oracle_family.arm: the {cfg.world} world cannot draw fresh problems of the weak problems' "
                        "families; set oracle_family.arm: false")
    drawn = drawn.with_columns(source=pl.lit(SOURCE))
    tables, rejected, added = {}, {}, {}
    for table, rows in zip(TABLES, (drawn.head(n), drawn), strict=True):
        tables[table], rejected[table] = mix.mix(problems, {"oracle_family": rows}, SOURCE)
        added[table] = tables[table].height - problems.height
    short = "" if drawn.height == n * cfg.oracle_family.large_factor else \
        f" (the weak families ran out of fresh problems at {drawn.height})"
    ui.info(f"{STEP}: {problems.height} seed + {added[TABLES[0]]} and + {added[TABLES[1]]} fresh problems of the "
            f"weak problems' families{short}")
    return StageOutput(tables=tables, rejected=rejected,
                       info={"n": n, "large": n * cfg.oracle_family.large_factor, "added": added})


def settings(cfg: PipelineConfig, options: dict) -> dict:
    return {"oracle_family": cfg.oracle_family.model_dump(mode="json"), "dose": cfg.mix.dose, "seed": cfg.seed,
            "world": cfg.world}


DECLARED = (
    Stage(STEP, "Build the upper-bound arms' training sets: the seed problems plus fresh problems of the weak "
          "problems' own families (oracle_family.arm).", family_mixes, reads=("problems", "weakness"),
          more_reads=budget_tables, writes=TABLES, rejects=TABLES, settings=settings, section="oracle_family",
          title="oracle family", runs_when=lambda cfg: cfg.oracle_family.arm,
          example="sws oracle-family --run runs/demo"),
)
