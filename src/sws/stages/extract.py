"""`sws synthesize --steps extract`: the extractor lists k foundational concepts for each weak problem.

Reads `weakness.parquet` (the weak rows) and `problems.parquet` (their text); writes `concepts.parquet` and
`concepts.rejected.parquet` (outputs cut off at max_tokens, `truncated`, or with no parseable concept list,
`unparsed`, or with a control or bidi character in a concept, `control_characters`; with the raw text).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sws import text_hygiene, ui
from sws.artifacts import (
    STR,
    StageResult,
    empty_table,
    read_table,
    rejected_path,
    run_stage,
    table_path,
)
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.executors import executor_for
from sws.funnel import write_step_outputs
from sws.llm_calls import request_seed, role_request
from sws.parsing import parse_concepts
from sws.prompts import PromptTemplate, load_template
from sws.stage import Stage

STEP = "extract"
REJECTED_SCHEMA = {"problem_id": STR, "category": STR, "problem": STR, "raw": STR, "reject_reason": STR}


def weak_problems(run_dir: Path) -> pl.DataFrame:
    """problem_id, category, problem of every weak problem, in weakness.parquet order."""
    weakness = read_table(run_dir, "weakness")
    problems = read_table(run_dir, "problems")
    weak = weakness.filter(pl.col("weak")).select("problem_id", "category")
    joined = weak.join(problems.select("problem_id", "problem"), on="problem_id", how="left", maintain_order="left")
    unknown = joined.filter(pl.col("problem").is_null())["problem_id"].to_list()
    if unknown:
        raise UserError(
            f"{table_path(run_dir, 'weakness')}: problem_id '{unknown[0]}' is not in problems.parquet; "
            f"rerun `sws identify --run {run_dir}`"
        )
    return joined


def run(cfg: PipelineConfig, run_dir: Path, force: bool = False) -> StageResult:
    run_dir = Path(run_dir)
    template = load_template("extract", cfg.synthesize.prompt_dir, cfg.world)
    return run_stage(
        run_dir, STEP,
        config={
            "seed": cfg.seed, "extractor": cfg.roles.extractor.model_dump(mode="json"),
            "k": cfg.synthesize.concepts_per_problem, "prompt": template.digest,
        },
        inputs=[table_path(run_dir, "weakness"), table_path(run_dir, "problems")],
        outputs=[table_path(run_dir, "concepts"), rejected_path(run_dir, "concepts")],
        body=lambda: _extract(cfg, run_dir, template),
        force=force,
    )


def _extract(cfg: PipelineConfig, run_dir: Path, template: PromptTemplate) -> StageResult:
    weak = weak_problems(run_dir)
    k = cfg.synthesize.concepts_per_problem
    role = cfg.roles.extractor
    requests = [
        role_request(
            role, task="extract", fields={"problem": problem, "category": category, "k": k},
            text=template.render({"problem": problem, "category": category, "k": k}),
            n=1, seed=request_seed(cfg.seed, STEP, problem_id),
        )
        for problem_id, category, problem in weak.iter_rows()
    ]
    if not requests:
        ui.info(f"{STEP}: {table_path(run_dir, 'weakness')} has no weak problems; nothing to synthesize "
                f"(loosen identify.max_acc or identify.max_slope and rerun `sws identify --run {run_dir}`)")
    completions = executor_for(cfg, run_dir).complete("extractor", role, requests, cfg.synthesize.shard_size,
                                                      "extract concepts")
    kept, rejected = [], []
    for (problem_id, category, problem), answers in zip(weak.iter_rows(), completions, strict=True):
        raw = answers[0].text
        concepts = None if answers[0].truncated else parse_concepts(raw, k)
        reason = "truncated" if answers[0].truncated else "unparsed" if concepts is None else \
            text_hygiene.REJECT_REASON if text_hygiene.any_hostile(concepts) else None
        if reason is not None:
            rejected.append({"problem_id": problem_id, "category": category, "problem": problem, "raw": raw,
                             "reject_reason": reason})
        else:
            kept.append({"problem_id": problem_id, "category": category, "concepts": concepts, "problem": problem})
    concepts_table = pl.DataFrame(kept, schema={**empty_table("concepts").schema, "problem": STR})
    return write_step_outputs(run_dir, STEP, "concepts", weak.height, concepts_table,
                              pl.DataFrame(rejected, schema=REJECTED_SCHEMA),
                              [completion for answers in completions for completion in answers])


DECLARED = (Stage(
    STEP, "The extractor lists the foundational concepts of each weak problem.", drive=run, reads=('weakness', 'problems'), writes=('concepts',),
    roles=('extractor',), section="synthesize", uses_executor=True, synthesis_step=True, funnel=True,
    command="sws synthesize --steps extract", in_run=False),)
