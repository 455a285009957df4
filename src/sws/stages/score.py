"""`sws filter`'s first step, `score`: the policy's accuracy on each labeled problem (DESIGN §1.4).

The policy (roles.policy; an empty model means `train/initial/final`) samples `filter.rollouts` answers per
labeled problem at the training temperature, graded against the label by the world's verifier, into
`scored.parquet` (n, n_correct, accuracy). `n` counts the graded samples: one whose grading ran out of time is
ungraded, neither right nor wrong, so accuracy = n_correct / n is over the graded ones (null when none was).
With audit.policy_disagrees, `policy_answer` is the one answer all of a problem's samples state (at least two,
none cut off), for the filter's `policy_disagrees` check. With the audit on, the audited problems are scored.
Requests go out in shards through the request cache, so a rerun after a kill asks nothing twice. Each adaptive
round scores its own problems (`adapt/round-<r>/scored.parquet`).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sws import ui
from sws.config import EngineConfig, PipelineConfig
from sws.consistency import sample_answer
from sws.engines import Completion
from sws.engines.fanout import fan_out
from sws.errors import UserError
from sws.executors import Executor
from sws.grading import GradingPool, Verdict, grade_answer_pairs, graded_count, group_answers
from sws.policy import Sampling, grade_samples, policy_requests, policy_role, sample_and_grade, sample_policy
from sws.run_dir import RunDir
from sws.runner import StageContext, StageOutput, scoped
from sws.stage import Stage
from sws.stages import audit

STEP = "score"
# Accuracies are ratios of small integers; this keeps 0.75 (say) inside a band ending at 0.75.
BAND_TOLERANCE = 1e-9
# Policy requests are seeded as `sws filter` always seeded them, so the request cache still answers them.
FILTER_SEED = "filter"


def settings(cfg: PipelineConfig, options: dict) -> dict:
    return {
        # With waves, when to stop depends on the band; without, the band is the filter step's alone.
        "filter": {**cfg.filter.model_dump(mode="json", exclude={"shard_size", "band", "wave"} if cfg.filter.wave is None
                                           else {"shard_size"}),
                   "max_tokens": cfg.filter_max_tokens},
        "policy": cfg.roles.policy.model_dump(mode="json"), "temperature": cfg.train.temperature,
        "world": cfg.world, "seed": cfg.seed, "policy_disagrees": cfg.audit.policy_disagrees,
    }


def policy_model(cfg: PipelineConfig, run: RunDir) -> list[Path]:
    """The policy's folder, whose weights decide the accuracies."""
    model = Path(policy_role(cfg, run.root).model)
    return [model] if model.is_dir() else []


def source(cfg: PipelineConfig, adapt_round: int) -> tuple[str, ...]:
    """The labels the policy is scored on: the audited ones when the audit is on, else the labeled ones."""
    return (scoped("audited" if audit.is_on(cfg) else "labeled", adapt_round),)


def score(context: StageContext) -> StageOutput:
    """The policy's accuracy on round `adapt_round`'s labels."""
    cfg, executor = context.cfg, context.executor
    policy = policy_role(cfg, context.run.root)
    [(name, labeled)] = context.tables.items()
    if labeled.height == 0 and context.adapt_round == 0:
        raise UserError(f"{context.source(name)}: no {name} problems to filter; see `sws synthesize`'s funnel "
                        "for where they were rejected")
    problems = list(labeled.select("syn_id", "problem", "answer").iter_rows())
    if cfg.filter.wave is None:
        completions = sample_policy(cfg, executor, policy, [(key, problem) for key, problem, _ in problems],
                                    [filter_sampling(cfg)], cfg.filter.shard_size, "filter: policy answers")
        [verdicts] = grade_samples(cfg, executor, problems, [filter_sampling(cfg)], completions)
    else:
        completions, verdicts = sampled_in_waves(cfg, executor, policy, problems)
    counts = pl.DataFrame([graded_count(problem_verdicts) for problem_verdicts in verdicts],
                          schema={"n": pl.Int64, "n_correct": pl.Int64}, orient="row")
    unanimous = (executor.map_graded(unanimous_answers, [
        [sample_answer(completion, context.world.verifier) for completion in samples] for samples in completions])
        if cfg.audit.policy_disagrees else [None] * labeled.height)
    scored = pl.concat([labeled, counts], how="horizontal").with_columns(
        pl.when(pl.col("n") > 0).then(pl.col("n_correct") / pl.col("n")).alias("accuracy"),
        pl.Series("policy_answer", unanimous, dtype=pl.Utf8))
    ungraded = sum(map(len, completions)) - int(scored["n"].sum())
    if ungraded:
        ui.info(f"filter: {ungraded} policy answers ran out of grading time (grading.deadline_s); they count "
                "as ungraded, neither right nor wrong")
    accuracy_counts = {str(k): int(v) for k, v in scored["n_correct"].value_counts(sort=True).iter_rows()}
    return StageOutput(tables={"scored": scored},
                       info={"accuracy_counts": accuracy_counts, "ungraded_samples": ungraded})


def filter_sampling(cfg: PipelineConfig) -> Sampling:
    return Sampling(cfg.filter.rollouts, cfg.train.temperature, cfg.filter_max_tokens, (FILTER_SEED,))


def policy_graded_counts(
    cfg: PipelineConfig, executor: Executor, policy: EngineConfig, labeled: pl.DataFrame
) -> list[tuple[int, int]]:
    """Per labeled problem, how many of the policy's `filter.rollouts` samples were graded, and how many of those
    reach the labeled answer."""
    [verdicts] = sample_and_grade(cfg, executor, policy, list(labeled.select("syn_id", "problem", "answer").iter_rows()),
                                  [filter_sampling(cfg)], cfg.filter.shard_size, "filter: policy answers")
    return [graded_count(problem_verdicts) for problem_verdicts in verdicts]


def sampled_in_waves(cfg: PipelineConfig, executor: Executor, policy: EngineConfig, problems: list[tuple[str, str, str]]
                     ) -> tuple[list[list[Completion]], list[list[Verdict]]]:
    """The policy's samples of each problem and their verdicts, drawn filter.wave at a time as single-sample
    requests (`fan_out`: seeds seed, seed + 1, ...) until `band_settled`."""
    wave, total = cfg.filter.wave, cfg.filter.rollouts
    requests = policy_requests(cfg, policy, [(key, problem) for key, problem, _ in problems], filter_sampling(cfg))
    singles = [fan_out(request) for request in requests]
    drawn: list[list[Completion]] = [[] for _ in problems]
    verdicts: list[list[Verdict]] = [[] for _ in problems]
    zero_matters = cfg.synthesize.adapt_rounds > 0 or cfg.audit.policy_disagrees
    one_matters = cfg.synthesize.adapt_rounds > 0 and cfg.synthesize.adapt_harder
    pending = list(range(len(problems)))
    while pending:
        asked = [(index, single) for index in pending
                 for single in singles[index][len(drawn[index]):len(drawn[index]) + wave]]
        answered = executor.complete("policy", policy, [single for _, single in asked], cfg.filter.shard_size,
                                     f"filter: policy answers (wave of {wave})")
        graded = executor.map_graded(grade_answer_pairs, [(problems[index][2], completion.text)
                                                    for (index, _), [completion] in zip(asked, answered, strict=True)])
        for (index, _), [completion], verdict in zip(asked, answered, graded, strict=True):
            drawn[index].append(completion)
            verdicts[index].append(verdict)
        pending = [index for index in pending
                   if not band_settled(verdicts[index], total, cfg.filter.band, zero_matters, one_matters)]
    return drawn, verdicts


def band_settled(verdicts: list[Verdict], total: int, band: tuple[float, float], zero_matters: bool,
                 one_matters: bool) -> bool:
    """Whether the rest of a problem's `total` samples can change whether its accuracy lies in `band`: the final
    accuracy lies between correct / (graded + left) and (correct + left) / (graded + left) (an ungraded sample
    counts in neither), so it is settled when that range lies wholly inside or wholly outside the band. A problem
    with nothing graded yet, or still at accuracy 0 when that matters (`zero_matters`: the adaptive rounds and
    policy_disagrees), or at 1 (`one_matters`: adapt_harder), is not settled until every sample is drawn."""
    left = total - len(verdicts)
    graded, correct = graded_count(verdicts)
    if left <= 0:
        return True
    if graded == 0 or (zero_matters and correct == 0) or (one_matters and correct == graded):
        return False
    lowest, highest = correct / (graded + left), (correct + left) / (graded + left)
    low, high = band
    inside = low - BAND_TOLERANCE <= lowest and highest <= high + BAND_TOLERANCE
    outside = highest < low - BAND_TOLERANCE or lowest > high + BAND_TOLERANCE
    return inside or outside


def unanimous_answers(sampled: list[list[str | None]], pool: GradingPool) -> list[str | None]:
    """A grading body: per problem's answers, the answer of their single equivalence group, if all are in one."""
    unanimous = []
    for answers in sampled:
        groups = group_answers(answers, pool) if len(answers) >= 2 and None not in answers else []
        unanimous.append(groups[0].answer if len(groups) == 1 else None)
    return unanimous


STAGE = Stage(
    STEP, "The policy's accuracy on each labeled problem.", score, more_reads=source, writes=("scored",),
    settings=settings, input_files=policy_model, section="filter", uses_executor=True, command="sws filter",
    in_run=False)
DECLARED = (STAGE,)
