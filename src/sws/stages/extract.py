"""`sws synthesize --sub-steps extract`: the extractor lists k foundational concepts for each weak problem.

Reads `weakness.parquet` (the weak rows) and `problems.parquet` (their text); writes `concepts.parquet` and
`concepts.rejected.parquet` (outputs cut off at max_tokens, `truncated`, or with no parseable concept list,
`unparsed`, or with a control or bidi character in a concept, `control_characters`; with the raw text).
"""

from __future__ import annotations

import polars as pl

from sws import text_hygiene, ui
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.llm_calls import request_seed, role_request
from sws.parsing import parse_concepts
from sws.prompts import PromptTemplate, load_template
from sws.runner import StageContext, StageOutput
from sws.stage import Stage
from sws.tables import STR, empty_table

STEP = "extract"
REJECTED_SCHEMA = {"problem_id": STR, "category": STR, "problem": STR, "raw": STR, "reject_reason": STR}


def weak_problems(context: StageContext) -> pl.DataFrame:
    """problem_id, category, problem of every weak problem, in weakness.parquet order."""
    weak = context.table("weakness").filter(pl.col("weak")).select("problem_id", "category")
    joined = weak.join(context.table("problems").select("problem_id", "problem"), on="problem_id", how="left",
                       maintain_order="left")
    unknown = joined.filter(pl.col("problem").is_null())["problem_id"].to_list()
    if unknown:
        raise UserError(
            f"{context.source('weakness')}: problem_id '{unknown[0]}' is not in problems.parquet; "
            f"rerun `sws identify --run {context.run.root}`"
        )
    return joined


def template(cfg: PipelineConfig) -> PromptTemplate:
    return load_template("extract", cfg.synthesize.prompt_dir, cfg.world)


def settings(cfg: PipelineConfig, options: dict) -> dict:
    return {"seed": cfg.seed, "extractor": cfg.roles.extractor.model_dump(mode="json"),
            "k": cfg.synthesize.concepts_per_problem, "prompt": template(cfg).digest}


def extract(context: StageContext) -> StageOutput:
    """The extractor's concept list for each weak problem; outputs it cannot give one for are rejected."""
    cfg = context.cfg
    weak = weak_problems(context)
    k = cfg.synthesize.concepts_per_problem
    role, prompt = cfg.roles.extractor, template(cfg)
    requests = [
        role_request(
            role, task="extract", fields={"problem": problem, "category": category, "k": k},
            text=prompt.render({"problem": problem, "category": category, "k": k}),
            n=1, seed=request_seed(cfg.seed, STEP, problem_id),
        )
        for problem_id, category, problem in weak.iter_rows()
    ]
    if not requests:
        ui.info(f"{STEP}: {context.source('weakness')} has no weak problems; nothing to synthesize "
                f"(loosen identify.max_acc or identify.max_slope and rerun `sws identify --run {context.run.root}`)")
    completions = context.executor.complete("extractor", role, requests, cfg.synthesize.shard_size,
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
    return StageOutput(
        tables={"concepts": pl.DataFrame(kept, schema={**empty_table("concepts").schema, "problem": STR})},
        rejected={"concepts": pl.DataFrame(rejected, schema=REJECTED_SCHEMA)}, rows_in=weak.height,
        completions=[completion for answers in completions for completion in answers])


STAGE = Stage(
    STEP, "The extractor lists the foundational concepts of each weak problem.", extract,
    reads=("weakness", "problems"), writes=("concepts",), rejects=("concepts",), settings=settings,
    roles=("extractor",), section="synthesize", uses_executor=True, synthesis_step=True, funnel=True,
    command="sws synthesize --sub-steps extract", in_run=False)
DECLARED = (STAGE,)
