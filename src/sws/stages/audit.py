"""`sws synthesize --sub-steps audit`: a second model checks the labels (on when roles.auditor is set).

Reads `labeled.parquet`; writes `audited.parquet` and `audited.rejected.parquet`, which the filter then reads
instead of `labeled`. Agreement among the labeler's samples is not correctness: a labeler that copies a wrong
solution, or shares one mistake across its samples, passes the consistency rule. The auditor (roles.auditor,
best a different model) solves each labeled problem audit.samples times from the same prompt as the labeler,
never seeing the label; the world's verifier compares each of its final answers with the label. A problem is
quarantined as `audit_disagrees` when more than audit.max_disagreement of the auditor's answers (those it
finished and stated) differ from the label; the sidecar keeps both the label (`answer`) and the auditor's
majority answer (`audit_answer`). A problem the auditor answers not at all is kept: the audit has no evidence.

audit.sample: N audits N labeled problems drawn at random (seeded) and passes the others unaudited
(`audited` false), which estimates the share of wrong labels for a fraction of the cost; `wrong_label_rate`
gives that share among the audited ones with a 95 % (Wilson) interval, kept in the manifest for the report.
"""

from __future__ import annotations

import math
import random
from typing import Any

import polars as pl

from sws import ui
from sws.config import PipelineConfig, require_roles
from sws.consistency import sample_answer
from sws.grading import GradingPool, grade_many, group_answers
from sws.llm_calls import request_seed, role_request
from sws.parsing import split_solution
from sws.prompts import load_template
from sws.runner import StageContext, StageOutput
from sws.stage import Stage
from sws.tables import BOOL, FLOAT, STR, STR_LIST

STEP = "audit"
REASON = "audit_disagrees"
AUDIT_SCHEMA = {"audited": BOOL, "audit_answer": STR, "audit_answers": STR_LIST, "audit_agreement": FLOAT}
Z_95 = 1.959963984540054


def is_on(cfg: PipelineConfig) -> bool:
    """audit.enabled, or (when it is not set) whether an auditor is configured."""
    return cfg.audit.enabled if cfg.audit.enabled is not None else cfg.roles.auditor is not None


def settings(cfg: PipelineConfig, options: dict) -> dict:
    require_roles(cfg, ["auditor"], "the pipeline config (audit.enabled is true)")
    return {"seed": cfg.seed, "auditor": cfg.roles.auditor.model_dump(mode="json"),
            "prompt": load_template("label", cfg.synthesize.prompt_dir, cfg.world).digest,
            "audit": cfg.audit.model_dump(mode="json", exclude={"enabled", "policy_disagrees"})}


def audit(context: StageContext) -> StageOutput:
    """The auditor's answers to a sample of the labeled problems; a label it contradicts is quarantined."""
    cfg, executor = context.cfg, context.executor
    template = load_template("label", cfg.synthesize.prompt_dir, cfg.world)
    labeled = context.table("labeled")
    chosen = audit_sample(labeled["syn_id"].to_list(), cfg.audit.sample, cfg.seed)
    asked = [row for row in labeled.iter_rows(named=True) if row["syn_id"] in chosen]
    requests = [
        role_request(cfg.roles.auditor, task="label", fields={"problem": statement},
                     text=template.render({"problem": statement}), n=cfg.audit.samples,
                     seed=request_seed(cfg.seed, STEP, row["syn_id"]))
        for row in asked for statement in [split_solution(row["problem"])[0]]
    ]
    completions = executor.complete("auditor", cfg.roles.auditor, requests, cfg.synthesize.shard_size,
                                    "audit answers")
    answers = [[sample_answer(completion, context.world.verifier) for completion in samples]
               for samples in completions]
    verdicts = executor.map_graded(audit_verdicts, [[row["answer"], sampled]
                                                    for row, sampled in zip(asked, answers, strict=True)])
    audits = {row["syn_id"]: (sampled, verdict) for row, sampled, verdict in zip(asked, answers, verdicts,
                                                                                 strict=True)}
    kept, rejected = [], []
    for row in labeled.iter_rows(named=True):
        sampled, (majority, agreement) = audits.get(row["syn_id"], (None, (None, None)))
        record = {**row, "audited": sampled is not None, "audit_answer": majority, "audit_answers": sampled,
                  "audit_agreement": agreement}
        if agreement is not None and 1 - agreement > cfg.audit.max_disagreement:
            rejected.append({**record, "reject_reason": REASON})
        else:
            kept.append(record)
    schema = {**labeled.schema, **AUDIT_SCHEMA}
    judged = sum(agreement is not None for _, (_, agreement) in audits.values())
    rate = wrong_label_rate(len(rejected), judged)
    ui.info(f"audit: {len(rejected)} of {judged} audited labels contradicted by the auditor "
            f"({rate['rate']:.1%}, 95% interval {rate['low']:.1%}-{rate['high']:.1%}); "
            f"{labeled.height - len(asked)} not audited")
    return StageOutput(tables={"audited": pl.DataFrame(kept, schema=schema)},
                       rejected={"audited": pl.DataFrame(rejected, schema={**schema, "reject_reason": STR})},
                       completions=[completion for samples in completions for completion in samples],
                       info={"audited": len(asked), "judged": judged, "disagrees": len(rejected),
                             "wrong_label_rate": rate})


def audit_sample(ids: list[str], size: int | None, seed: int) -> set[str]:
    """The ids to audit: all, or `size` of them drawn with the run's seed (the same ones on every rerun)."""
    if size is None or size >= len(ids):
        return set(ids)
    return set(random.Random(f"{seed}\x1f{STEP}").sample(sorted(ids), size))


def audit_verdicts(items: list[list[Any]], pool: GradingPool) -> list[tuple[str | None, float | None]]:
    """A grading body: per (label, auditor answers), the auditor's majority answer and the share of its stated
    answers equivalent to the label (None when it stated none). A comparison whose grading ran out of time
    counts neither way."""
    results: list[tuple[str | None, float | None]] = []
    for label, answers in items:
        stated = [answer for answer in answers if answer is not None]
        groups = group_answers(answers, pool)
        verdicts = [verdict for verdict in grade_many([(label, answer) for answer in stated], pool)
                    if verdict is not None]
        agreement = sum(verdicts) / len(verdicts) if verdicts else None
        results.append((groups[0].answer if groups else None, agreement))
    return results


def wrong_label_rate(wrong: int, judged: int) -> dict[str, float]:
    """The share of wrong labels among the judged ones, with its 95 % Wilson score interval (all 0 when none
    was judged)."""
    if judged == 0:
        return {"rate": 0.0, "low": 0.0, "high": 0.0, "n": 0}
    share = wrong / judged
    denominator = 1 + Z_95 ** 2 / judged
    centre = (share + Z_95 ** 2 / (2 * judged)) / denominator
    half = Z_95 * math.sqrt(share * (1 - share) / judged + Z_95 ** 2 / (4 * judged ** 2)) / denominator
    return {"rate": share, "low": max(0.0, centre - half), "high": min(1.0, centre + half), "n": judged}


STAGE = Stage(
    STEP, "Check the labels: an auditor solves each labeled problem without seeing its label.", audit,
    reads=("labeled",), writes=("audited",), rejects=("audited",), settings=settings, roles=("auditor",),
    section="audit", uses_executor=True, synthesis_step=True, funnel=True, command="sws synthesize --sub-steps audit",
    in_run=False, runs_when=is_on)
DECLARED = (STAGE,)
