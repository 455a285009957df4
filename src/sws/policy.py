"""The policy being trained, as the stages ask it: which model `roles.policy` means, and sampling it on problems
with known answers, graded by the world's verifier. One rule for filter, weak-to-strong labeling and eval."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sws.config import EngineConfig, PipelineConfig
from sws.current_policy import current_policy, names_policy
from sws.engines.base import Completion, Request
from sws.executors import Executor
from sws.grading import Verdict, grade_answer_pairs
from sws.llm_calls import request_seed
from sws.world import get_world


def policy_role(cfg: PipelineConfig, run_dir: Path) -> EngineConfig:
    """roles.policy, an empty model (or `policy`) meaning the round's policy checkpoint (which must exist)."""
    role = cfg.roles.policy
    if role.model and not names_policy(role):
        return role
    why = "roles.policy.model: policy" if role.model else "roles.policy.model is empty, which"
    return role.model_copy(update={"model": str(current_policy(run_dir, "roles.policy.model", why))})


@dataclass(frozen=True)
class Sampling:
    """How the policy is asked: samples per problem, temperature, token limit, and what seeds the requests."""

    n: int
    temperature: float
    max_tokens: int
    seed_parts: tuple[str, ...]


def policy_requests(cfg: PipelineConfig, role: EngineConfig, problems: Sequence[tuple[str, str]],
                    sampling: Sampling) -> list[Request]:
    """One request per (key, problem), seeded by the run's seed, `sampling.seed_parts` and the key."""
    world = get_world(cfg.world)
    return [
        Request(**world.policy_prompt(problem), n=sampling.n, temperature=sampling.temperature, top_p=role.top_p,
                max_tokens=sampling.max_tokens, seed=request_seed(cfg.seed, *sampling.seed_parts, key),
                task="answer", fields={"problem": problem})
        for key, problem in problems
    ]


def sample_and_grade(cfg: PipelineConfig, executor: Executor, role: EngineConfig,
                     problems: Sequence[tuple[str, str, str]], samplings: Sequence[Sampling], shard_size: int,
                     description: str) -> list[list[list[Verdict]]]:
    """Per sampling, per (key, problem, answer): the verdict of each of the policy's samples against the answer
    (None: its grading ran out of time). All samplings go to the executor as one batch."""
    completions = sample_policy(cfg, executor, role, [(key, problem) for key, problem, _ in problems], samplings,
                                shard_size, description)
    return grade_samples(cfg, executor, problems, samplings, completions)


def sample_policy(cfg: PipelineConfig, executor: Executor, role: EngineConfig, problems: Sequence[tuple[str, str]],
                  samplings: Sequence[Sampling], shard_size: int, description: str) -> list[list[Completion]]:
    """The policy's completions per sampling and (key, problem), in that order, as one executor batch."""
    requests = [request for sampling in samplings for request in policy_requests(cfg, role, problems, sampling)]
    return executor.complete("policy", role, requests, shard_size, description)


def grade_samples(cfg: PipelineConfig, executor: Executor, problems: Sequence[tuple[str, str, str]],
                  samplings: Sequence[Sampling], completions: list[list[Completion]]) -> list[list[list[Verdict]]]:
    """`sample_and_grade`'s verdicts for the completions `sample_policy` returned."""
    answers = [answer for _, _, answer in problems] * len(samplings)
    verdicts = executor.map_graded(grade_answer_pairs, [
        (answer, sample.text) for answer, samples in zip(answers, completions, strict=True) for sample in samples])
    per_sampling: list[list[list[Verdict]]] = []
    start = 0
    for sampling in samplings:
        groups = []
        for _ in problems:
            groups.append(verdicts[start:start + sampling.n])
            start += sampling.n
        per_sampling.append(groups)
    return per_sampling
