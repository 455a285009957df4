"""Difficulty-adaptive regeneration (synthesize.adapt_rounds): the steps of one round, run by `sws filter`.

The difficulty band drops every problem the policy never solves, and those are often the ones on the concepts
it lacks most. After the policy has scored a round's labeled problems (`sws.stages.score`), round r >= 1
sends each problem of round r - 1 that it never solved (accuracy 0) back to the generator with its concepts
and a request for an easier problem than it; with synthesize.adapt_harder, each problem it always solved
(accuracy 1) asks for a harder one. Those requests are round r's concept sets
(`adapt/round-<r>/concept_sets.parquet`: the source problem's concepts and level, plus `direction`,
`source_syn_id` and `source_problem`); generate, rate and label then run on them exactly as on round 0, each a
stage with its own manifest under `manifests/adapt/round-<r>/`, through the run's request cache, so a killed
round resumes where it stopped.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl

from sws import runner
from sws.config import PipelineConfig
from sws.manifests import StageResult
from sws.runner import StageContext, StageOutput
from sws.stage import Stage
from sws.stages import audit, generate, label, rate
from sws.tables import STR, empty_table, round_name

STEP = "request"
REQUEST_COLUMNS = {"direction": STR, "source_syn_id": STR, "source_problem": STR}


def adapt_set_id(adapt_round: int, direction: str, source_syn_id: str) -> str:
    key = "\x1f".join([f"adapt round {adapt_round}", direction, source_syn_id])
    return "set-" + hashlib.sha256(key.encode()).hexdigest()[:16]


def adapt_requests(scored: pl.DataFrame, adapt_round: int, harder: bool) -> pl.DataFrame:
    """Round `adapt_round`'s concept sets: an easier problem than each scored one never solved, and with
    `harder` a harder one than each always solved. A problem with no graded sample (accuracy null) asks for
    neither: its difficulty is unknown."""
    rows = []
    for row in scored.iter_rows(named=True):
        direction = "easier" if row["accuracy"] == 0 else "harder" if harder and row["accuracy"] == 1 else None
        if direction is not None:
            rows.append({"set_id": adapt_set_id(adapt_round, direction, row["syn_id"]), "category": row["category"],
                         "concepts": row["concepts"], "level": row["level"], "instance": 0, "direction": direction,
                         "source_syn_id": row["syn_id"], "source_problem": row["problem"]})
    return pl.DataFrame(rows, schema=empty_table("concept_sets", REQUEST_COLUMNS).schema)


def previous_scored(cfg: PipelineConfig, adapt_round: int) -> tuple[str, ...]:
    """The problems the round before scored."""
    return (round_name("scored", adapt_round - 1),)


def request(context: StageContext) -> StageOutput:
    """Round r's concept sets from the problems round r - 1 scored."""
    [scored] = previous_scored(context.cfg, context.adapt_round)
    requests = adapt_requests(context.table(scored), context.adapt_round, context.cfg.synthesize.adapt_harder)
    directions = dict(requests["direction"].value_counts().iter_rows())
    return StageOutput(tables={"concept_sets": requests},
                       info={"easier": directions.get("easier", 0), "harder": directions.get("harder", 0)})


# Run by `run_round` in rounds r >= 1 only: its concept sets are the round's (`runner.ROUND_TABLES`).
REQUEST = Stage(
    STEP, "An easier (harder) problem than each one the policy never (always) solved.", request,
    more_reads=previous_scored, writes=("concept_sets",),
    settings=lambda cfg, options: {"adapt_harder": cfg.synthesize.adapt_harder}, section="synthesize",
    command="sws filter", in_run=False)


def run_round(cfg: PipelineConfig, run_dir: Path, adapt_round: int, force: bool = False) -> list[StageResult]:
    """Requests, generate, rate, label and (when on) audit of round `adapt_round` (the policy's scoring follows in
    filter)."""
    steps = (REQUEST, generate.STAGE, rate.STAGE, label.STAGE, *([audit.STAGE] if audit.is_on(cfg) else []))
    return [runner.run(step, cfg, run_dir, force, adapt_round=adapt_round) for step in steps]
