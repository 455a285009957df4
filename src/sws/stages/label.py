"""`sws synthesize --sub-steps label`: reference answers by self-consistency of the labeler.

Reads `rated.parquet`; writes `labeled.parquet` and `labeled.rejected.parquet`. The labeler samples N answers
(synthesize.label_samples) to the problem statement with any leaked solution removed
(`sws.parsing.split_solution`); the world's verifier extracts them and groups them by equivalence
(unparsed answers and samples cut off at max_tokens never form a group: a cut-off solution's intermediate
`\\boxed{}` is no final answer). A comparison whose grading runs out of time is "not known equal": it merges
no groups. A problem is kept when the largest group holds at least synthesize.min_consistency of the N
samples and no other group is as large (a tie, 4 of 8 against 4, is rejected as `tied_answers`); its
representative becomes `answer`, and `consistency` is the group's share. Consistency cannot catch an answer the problem text dictates: when the problem carries a solution whose answer is the largest
group's, the label is rejected as `copied_solution`. A label or problem holding a control or bidi character
(`sws.text_hygiene`) is rejected as `control_characters`.
Weak-to-strong (synthesize.weak_to_strong): the labeler is a weaker teacher, so additionally its consistency
must exceed 50 % and the student policy (roles.policy, prompted as in training) must reach the same answer in
at least synthesize.student_min_agreement of its M samples (synthesize.student_samples) that could be graded;
with none graded the problem is rejected as `ungraded`.
Early stopping (synthesize.label_wave: k): the samples come k at a time as single-sample requests with seeds
seed, seed + 1, ... (what n_mode fanout sends), and a problem gets no more once its decision and label cannot
change (`label_settled`). The kept problems and their labels are those of drawing all N the same way, and the
cache answers those requests; `consistency` is then the largest group's share of the samples drawn.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sws import text_hygiene, ui
from sws.config import EngineConfig, PipelineConfig
from sws.consistency import (
    WEAK_TO_STRONG_MIN_CONSISTENCY,
    sample_answer,
    teacher_labels,
    teacher_reason,
)
from sws.engines import Completion, Request
from sws.engines.fanout import fan_out
from sws.executors import Executor
from sws.grading import equivalent, graded_count, shared_pool
from sws.llm_calls import request_seed, role_request
from sws.parsing import split_solution
from sws.policy import Sampling, policy_role, sample_and_grade
from sws.prompts import PromptTemplate, load_template
from sws.run_dir import RunDir
from sws.runner import StageContext, StageOutput
from sws.stage import Stage
from sws.tables import FLOAT, STR, STR_LIST
from sws.verifier import Verifier
from sws.world import get_world

STEP = "label"
LABEL_SCHEMA = {"answer": STR, "consistency": FLOAT, "answers": STR_LIST, "student_agreement": FLOAT}


def settings(cfg: PipelineConfig, options: dict) -> dict:
    synth = cfg.synthesize
    decided = {
        "seed": cfg.seed, "labeler": cfg.roles.labeler.model_dump(mode="json"), "prompt": template(cfg).digest,
        "label_samples": synth.label_samples, "min_consistency": synth.min_consistency,
        "weak_to_strong": synth.weak_to_strong, "label_wave": synth.label_wave,
    }
    if synth.weak_to_strong:
        decided |= {"student": cfg.roles.policy.model_dump(mode="json"), "world": cfg.world,
                    "student_samples": synth.student_samples, "student_min_agreement": synth.student_min_agreement}
    return decided


def student_model(cfg: PipelineConfig, run: RunDir) -> list[Path]:
    """The student policy's folder, whose weights decide weak-to-strong labels."""
    return [Path(policy_role(cfg, run.root).model)] if cfg.synthesize.weak_to_strong else []


def template(cfg: PipelineConfig) -> PromptTemplate:
    return load_template("label", cfg.synthesize.prompt_dir, cfg.world)


def label(context: StageContext) -> StageOutput:
    """The labeler's answers to each rated problem, grouped by equivalence; the largest group's answer is the label."""
    cfg, executor = context.cfg, context.executor
    synth = cfg.synthesize
    prompt = template(cfg)
    student = policy_role(cfg, context.run.root) if synth.weak_to_strong else None
    rated = context.table("rated")
    ids, problems = rated["syn_id"].to_list(), rated["problem"].to_list()
    split = [split_solution(problem) for problem in problems]
    statements, leaked = [statement for statement, _ in split], [solution for _, solution in split]
    requests = [
        role_request(cfg.roles.labeler, task="label", fields={"problem": statement},
                     text=prompt.render({"problem": statement}), n=synth.label_samples,
                     seed=request_seed(cfg.seed, STEP, problem_id))
        for problem_id, statement in zip(ids, statements, strict=True)
    ]
    if not requests:
        ui.info(f"{STEP}: {context.source('rated')} is empty; nothing to label")
    if synth.label_wave is None:
        completions = executor.complete("labeler", cfg.roles.labeler, requests, synth.shard_size, "label answers")
    else:
        completions = sampled_in_waves(cfg, executor, requests, synth.label_wave, student is not None)
    verifier = context.world.verifier
    answers = [[sample_answer(completion, verifier) for completion in samples] for samples in completions]
    labels = executor.map_graded(teacher_labels, answers)
    reasons = [teacher_reason(answer, consistency, tied, synth.min_consistency, student is not None)
               for answer, consistency, tied in labels]
    for index, ((answer, _, _), solution) in enumerate(zip(labels, leaked, strict=True)):
        if reasons[index] is None and copies_solution(answer, solution, verifier):
            reasons[index] = "copied_solution"
        if reasons[index] is None and text_hygiene.any_hostile([answer or "", problems[index]]):
            reasons[index] = text_hygiene.REJECT_REASON
    agreements: list[float | None] = [None] * len(problems)
    if student is not None:
        asked = [index for index, reason in enumerate(reasons) if reason is None]
        student_agreement = _student_agreement(
            cfg, executor, student, [(ids[i], statements[i], labels[i][0]) for i in asked])
        for index, agreement in zip(asked, student_agreement, strict=True):
            agreements[index] = agreement
            if agreement is None:
                reasons[index] = "ungraded"
            elif agreement < synth.student_min_agreement:
                reasons[index] = "student_disagrees"
    kept, rejected = [], []
    for row, sampled, (answer, consistency, _), agreement, reason in zip(
        rated.iter_rows(named=True), answers, labels, agreements, reasons, strict=True
    ):
        record = {**row, "answer": answer, "consistency": consistency, "answers": sampled,
                  "student_agreement": agreement}
        if reason is None:
            kept.append(record)
        else:
            rejected.append({**record, "reject_reason": reason})
    schema = {**rated.schema, **LABEL_SCHEMA}
    return StageOutput(tables={"labeled": pl.DataFrame(kept, schema=schema)},
                       rejected={"labeled": pl.DataFrame(rejected, schema={**schema, "reject_reason": STR})},
                       completions=[completion for samples in completions for completion in samples])


def sampled_in_waves(cfg: PipelineConfig, executor: Executor, requests: list[Request], wave: int,
                     weak_to_strong: bool) -> list[list[Completion]]:
    """Each request's samples, drawn `wave` at a time as single-sample requests (`fan_out`: seeds seed, seed + 1,
    ...) until `label_settled` says more cannot change the problem's decision or label."""
    synth = cfg.synthesize
    verifier = get_world(cfg.world).verifier
    singles = [fan_out(request) for request in requests]
    drawn: list[list[Completion]] = [[] for _ in requests]
    pending = list(range(len(requests)))
    while pending:
        asked = [(index, single) for index in pending
                 for single in singles[index][len(drawn[index]):len(drawn[index]) + wave]]
        answered = executor.complete("labeler", cfg.roles.labeler, [single for _, single in asked],
                                     synth.shard_size, f"label answers (wave of {wave})")
        for (index, _), [completion] in zip(asked, answered, strict=True):
            drawn[index].append(completion)
        groups = executor.map_graded(teacher_labels, [[sample_answer(c, verifier) for c in drawn[index]]
                                                      for index in pending])
        pending = [index for index, (_, share, _) in zip(pending, groups, strict=True)
                   if not label_settled(round(share * len(drawn[index])), len(drawn[index]), requests[index].n,
                                        synth.min_consistency, weak_to_strong)]
    return drawn


def label_settled(top: int, drawn: int, total: int, min_consistency: float, weak_to_strong: bool) -> bool:
    """Whether the labeler's remaining samples can change a problem's decision or label, given `top` of `drawn`
    samples in its largest answer group: settled when all are drawn, when no group can reach the consistency
    threshold any more, or when the largest group holds a strict majority of all `total` samples and meets the
    threshold (then no other group can tie it, so the label is the one full sampling gives)."""
    def passes(count: int) -> bool:
        share = count / total
        return share >= min_consistency and (not weak_to_strong or share > WEAK_TO_STRONG_MIN_CONSISTENCY)

    left = total - drawn
    return drawn >= total or not passes(top + left) or (passes(top) and 2 * top > total)


def copies_solution(answer: str | None, leaked_solution: str | None, verifier: Verifier) -> bool:
    """Whether a label is the answer of a solution that the problem text itself carries."""
    stated = verifier.extract(leaked_solution) if leaked_solution else None
    return answer is not None and stated is not None and equivalent(stated, answer, shared_pool(verifier))


def _student_agreement(
    cfg: PipelineConfig, executor: Executor, student: EngineConfig, asked: list[tuple[str, str, str]]
) -> list[float | None]:
    """Per (syn_id, problem, teacher answer): the share of the student's graded samples equivalent to the answer
    (None when none could be graded)."""
    if not asked:
        return []
    [verdicts] = sample_and_grade(
        cfg, executor, student, asked,
        [Sampling(cfg.synthesize.student_samples, student.temperature, student.max_tokens, (STEP, "student"))],
        cfg.synthesize.shard_size, "student answers")
    return [n_correct / n if n else None for n, n_correct in map(graded_count, verdicts)]


STAGE = Stage(
    STEP, "Reference answers by the labeler's self-consistency.", label, reads=("rated",), writes=("labeled",),
    rejects=("labeled",), settings=settings, input_files=student_model, roles=("labeler",), section="synthesize",
    uses_executor=True, synthesis_step=True, funnel=True, command="sws synthesize --sub-steps label", in_run=False)
DECLARED = (STAGE,)
