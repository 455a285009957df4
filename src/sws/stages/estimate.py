"""`sws synthesize --estimate`: a pilot through every synthesis step, projected to the whole budget.

The pilot runs in the run's scratch folder `RunDir.estimate` (marked as a pilot, so it uses the run's request
and embedding caches): extract on every weak problem (its cost does not depend on the budget, and the concept
sets are drawn from all the concepts), the budget's concept sets drawn as combine draws them, and then
`synthesize.estimate_share` of those sets (per category, the first by a hash of their id) through generate and
the later steps. Every request is the one the real run makes for the same problem (same prompt and seed), so
the real run gets them from the request cache. Per step and role, the pilot's tokens and seconds after combine
are scaled by sets / pilot sets; extract's are the real ones. Nothing of the real run is written: its tables and
manifests stay as they were. (With the ray executor, workers do not fill the request cache, so the real run asks
again.)
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import polars as pl

from sws import runner, tokens, ui
from sws.atomic_files import write_json, write_text
from sws.budget import largest_remainder
from sws.config import PipelineConfig
from sws.funnel import dataframe_table
from sws.llm_calls import shared_engines
from sws.manifests import StageResult
from sws.run_dir import PILOT_MARKER, RunDir
from sws.runner import StageContext, StageOutput
from sws.stage import Stage, synthesis_steps
from sws.stages import audit, combine, extract
from sws.stages.rounds import link_checkpoint

# Below this many pilot sets, the projections of rate and label were off by up to 40 % in the arith world
# (`bench/estimate.py`; the total by up to 15 %): they rest on the few pilot problems that pass generate and rate.
FEW_SETS = 200
INPUTS = ("weakness", "problems", "categories")


def pilot_sets(sets: pl.DataFrame, share: float) -> pl.DataFrame:
    """`share` of the concept sets (at least one when there are any), split over the categories by their count,
    the first of each category by a hash of the set id; in the sets' order."""
    if not sets.height:
        return sets
    counts = dict(sets["category"].value_counts().iter_rows())
    wanted = largest_remainder(counts, max(1, round(share * sets.height)))
    ranked = sets.with_columns(pl.col("set_id").map_elements(lambda text: hashlib.sha256(text.encode()).hexdigest(),
                                                             return_dtype=pl.Utf8).alias("_hash"))
    chosen = {set_id for category, count in wanted.items()
              for set_id in ranked.filter(pl.col("category") == category).sort("_hash")["set_id"][:count]}
    return sets.filter(pl.col("set_id").is_in(chosen))


def sample(context: StageContext) -> StageOutput:
    """The pilot's concept sets: `synthesize.estimate_share` of those combine draws for the whole budget."""
    drawn = combine.combine(context).tables["concept_sets"]
    return StageOutput(tables={"concept_sets": pilot_sets(drawn, context.cfg.synthesize.estimate_share)},
                       info={"sets": drawn.height})


# The pilot's combine step, run in the pilot's scratch run only.
SAMPLE = Stage(
    "pilot_sets", "A share of the concept sets of the whole budget, for the pilot.", sample,
    reads=combine.STAGE.reads, writes=combine.STAGE.writes,
    settings=lambda cfg, options: {**combine.settings(cfg, options), "share": cfg.synthesize.estimate_share},
    section="synthesize", command="sws synthesize --estimate", in_run=False)


def prepare_pilot(run_dir: Path) -> Path:
    """The scratch folder with copies of the run's inputs (unchanged copies kept) and its initial checkpoint."""
    run, pilot = RunDir(run_dir), RunDir(run_dir).estimate
    pilot.root.mkdir(parents=True, exist_ok=True)
    write_text(pilot.root / PILOT_MARKER, "scratch run of `sws synthesize --estimate`; its caches are the run's\n")
    runner.copy_tables(run.root, pilot.root, INPUTS)
    if run.initial_checkpoint.exists():
        link_checkpoint(run.initial_checkpoint, pilot.initial_checkpoint)
    return pilot.root


def run_pilot(cfg: PipelineConfig, run_dir: Path, steps: list[str], force: bool = False) -> dict[str, Any]:
    """Run the pilot in `RunDir(run_dir).estimate`; its projection for the whole budget (see the module)."""
    pilot = prepare_pilot(run_dir)
    declared = {**{stage.name: stage for stage in synthesis_steps()}, combine.STEP: SAMPLE}
    with shared_engines():
        results = {step: runner.run(declared[step], cfg, pilot, force) for step in steps}
    sampled = results.get(combine.STEP)
    drawn = {"sets": int(sampled.info["sets"]), "pilot_sets": int(sampled.rows["concept_sets"])} if sampled else {}
    factor = drawn["sets"] / drawn["pilot_sets"] if drawn.get("pilot_sets") else 0.0
    projected: dict[str, Any] = {}
    for step, result in results.items():
        scale = step_scale(step, result, factor, cfg.audit.sample)
        projected[step] = {
            "tokens": {role: {name: round(value * scale) for name, value in counts.items()}
                       for role, counts in result.tokens.items()},
            "pilot_tokens": result.tokens, "scale": scale, "seconds": round(result.seconds * scale, 3),
            "pilot_in": (result.info.get("funnel") or {}).get("in"),
        }
    estimate = {"share": cfg.synthesize.estimate_share, **drawn, "steps": projected,
                "weak_problems": projected[extract.STEP]["pilot_in"]}
    write_json(RunDir(pilot).root / "estimate.json", estimate)
    return estimate


def step_scale(step: str, result: StageResult, factor: float, audit_sample: int | None) -> float:
    """How many times the pilot's work the whole budget's step does: extract and combine did all of theirs in the
    pilot; an audit of `audit.sample` problems audits at most that many, whatever the budget; the other steps
    grow with the concept sets (`factor`)."""
    if step in (extract.STEP, combine.STEP):
        return 1.0
    audited = int(result.info.get("audited") or 0)
    if step != audit.STEP or audit_sample is None or not audited:
        return factor
    labeled = (result.info.get("funnel") or {}).get("in") or audited
    return min(audit_sample, labeled * factor) / audited


def projection_table(estimate: dict[str, Any], pricing: dict[str, Any]) -> pl.DataFrame:
    """Per step and role: the rows the pilot's step took in, the projected prompt and completion tokens,
    completions, cost and seconds; then the total."""
    rows, total, seconds = [], {}, 0.0
    for step, projected in estimate["steps"].items():
        seconds += projected["seconds"]
        roles = sorted(projected["tokens"].items()) or [("", None)]
        for index, (role, used) in enumerate(roles):
            rows.append({"step": step, "role": role, "pilot in": projected.get("pilot_in") if index == 0 else None,
                         "prompt tokens": used and used["prompt"],
                         "completion tokens": used and used["completion"], "completions": used and used["completions"],
                         "cost ($)": tokens.cost({role: used}, pricing) if used else None,
                         "seconds": projected["seconds"] if index == 0 else None})
            if used:
                total = tokens.add(total, {role: used})
    rows.append({"step": "total", "role": "", "pilot in": None, "prompt tokens": sum(u["prompt"] for u in total.values()),
                 "completion tokens": sum(u["completion"] for u in total.values()),
                 "completions": sum(u["completions"] for u in total.values()),
                 "cost ($)": tokens.cost(total, pricing), "seconds": round(seconds, 3)})
    schema = {"step": pl.Utf8, "role": pl.Utf8, "pilot in": pl.Int64, "prompt tokens": pl.Int64,
              "completion tokens": pl.Int64, "completions": pl.Int64, "cost ($)": pl.Float64, "seconds": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


def run(cfg: PipelineConfig, run_dir: Path, steps: list[str], force: bool = False) -> StageResult:
    """Run the pilot (`force`: every step of it again), print the projection, and stop."""
    estimate = run_pilot(cfg, run_dir, steps, force)
    table = projection_table(estimate, cfg.pricing)
    ui.console.print(dataframe_table(table, f"projected for the whole budget ({estimate.get('sets', 0)} concept sets)"))
    ui.info(f"synthesize --estimate: a pilot of {estimate.get('pilot_sets', 0)} of {estimate.get('sets', 0)} concept "
            f"sets (synthesize.estimate_share {estimate['share']:g}), extract on all "
            f"{estimate['weak_problems'] or 0} weak problems, in {RunDir(run_dir).estimate.root}; its requests are in "
            "the request cache, so the real run (`sws synthesize` without --estimate) does not ask them again")
    if 0 < estimate.get("pilot_sets", 0) < FEW_SETS < estimate.get("sets", 0):
        ui.info(f"synthesize --estimate: the steps after generate are projected from the few pilot problems that "
                f"reached them ('pilot in'), so take them as rough; raise synthesize.estimate_share (to "
                f"{FEW_SETS} pilot sets or more) for a closer projection")
    return StageResult("synthesize", info={"estimate": estimate})
