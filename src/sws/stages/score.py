"""`sws filter`'s first step, `score`: the policy's accuracy on each labeled problem (DESIGN §1.4).

The policy (roles.policy; an empty model means `train/initial/final`) samples `filter.rollouts` answers per
labeled problem at the training temperature, graded against the label by the world's answer check, into
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
from sws.artifacts import StageResult, read_table, round_name, run_stage, table_path, write_table
from sws.config import PipelineConfig
from sws.executors import executor_for
from sws.grading import GradingPool, graded_count, group_answers
from sws.policy import Sampling, grade_samples, policy_role, sample_policy
from sws.stage import Stage
from sws.stages import audit
from sws.stages.label import sample_answer

STEP = "score"
# Policy requests are seeded as `sws filter` always seeded them, so the request cache still answers them.
FILTER_SEED = "filter"


def run(cfg: PipelineConfig, run_dir: Path, force: bool = False, adapt_round: int = 0) -> StageResult:
    """The policy's accuracy on round `adapt_round`'s labeled problems, into its `scored` table."""
    run_dir = Path(run_dir)
    policy = policy_role(cfg, run_dir)
    source, target = audit.filter_source(cfg, adapt_round), round_name("scored", adapt_round)
    config = {
        "filter": cfg.filter.model_dump(mode="json", exclude={"shard_size", "band"}),
        "policy": policy.model_dump(mode="json"), "temperature": cfg.train.temperature,
        "world": cfg.world, "seed": cfg.seed, "policy_disagrees": cfg.audit.policy_disagrees,
    }
    inputs = [table_path(run_dir, source)] + ([Path(policy.model)] if Path(policy.model).is_dir() else [])

    def body() -> StageResult:
        labeled = read_table(run_dir, source)
        problems = list(labeled.select("syn_id", "problem", "answer").iter_rows())
        completions = sample_policy(cfg, run_dir, policy, [(key, problem) for key, problem, _ in problems],
                                    [filter_sampling(cfg)], cfg.filter.shard_size, "filter: policy answers")
        [verdicts] = grade_samples(cfg, run_dir, problems, [filter_sampling(cfg)], completions)
        counts = pl.DataFrame([graded_count(problem_verdicts) for problem_verdicts in verdicts],
                              schema={"n": pl.Int64, "n_correct": pl.Int64}, orient="row")
        unanimous = (executor_for(cfg, run_dir).map_graded(unanimous_answers, [
            [sample_answer(completion) for completion in samples] for samples in completions])
            if cfg.audit.policy_disagrees else [None] * labeled.height)
        scored = pl.concat([labeled, counts], how="horizontal").with_columns(
            pl.when(pl.col("n") > 0).then(pl.col("n_correct") / pl.col("n")).alias("accuracy"),
            pl.Series("policy_answer", unanimous, dtype=pl.Utf8))
        write_table(run_dir, target, scored)
        ungraded = cfg.filter.rollouts * scored.height - int(scored["n"].sum())
        if ungraded:
            ui.info(f"filter: {ungraded} policy answers ran out of grading time (grading.deadline_s); they count "
                    "as ungraded, neither right nor wrong")
        accuracy_counts = {str(k): int(v) for k, v in scored["n_correct"].value_counts(sort=True).iter_rows()}
        return StageResult(round_name(STEP, adapt_round), rows={target: scored.height},
                           info={"accuracy_counts": accuracy_counts, "ungraded_samples": ungraded})

    return run_stage(run_dir, round_name(STEP, adapt_round), config=config, inputs=inputs,
                     outputs=[table_path(run_dir, target)], body=body, force=force)


def filter_sampling(cfg: PipelineConfig) -> Sampling:
    return Sampling(cfg.filter.rollouts, cfg.train.temperature, cfg.filter.max_tokens, (FILTER_SEED,))


def unanimous_answers(sampled: list[list[str | None]], pool: GradingPool) -> list[str | None]:
    """A grading body: per problem's answers, the answer of their single equivalence group, if all are in one."""
    unanimous = []
    for answers in sampled:
        groups = group_answers(answers, pool) if len(answers) >= 2 and None not in answers else []
        unanimous.append(groups[0].answer if len(groups) == 1 else None)
    return unanimous


DECLARED = (Stage(
    STEP, "The policy's accuracy on each labeled problem.", run, reads=("labeled", "audited"), writes=("scored",),
    section="filter", uses_executor=True, command="sws filter", in_run=False),)
