"""The built-in arithmetic world as the pipeline sees it (DESIGN §6): a seed set drawn from the problem families,
a tiny policy warm-started locally, the rule-based oracle for every teacher role, and fresh held-out problems."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from sws.config import PipelineConfig
from sws.manifests import StageResult
from sws.near_duplicates import problem_key
from sws.run_dir import RunDir
from sws.world import PROBLEM_SET_SCHEMA, BuiltPolicy, PipelineStep, Truth, World
from sws.worlds.arith.construct import category_vocabulary, normalized
from sws.worlds.arith.families import (
    CATEGORIES,
    FAMILY_BY_NAME,
    category_concepts,
    sample_problem,
)
from sws.worlds.arith.held_out import heldout_problems
from sws.worlds.arith.prompt import policy_prompt
from sws.worlds.arith.settings import ArithSettings
from sws.worlds.arith.truth import family_of, solve
from sws.worlds.math.verifier import MathVerifier

ORACLE = {"engine": "oracle", "model": "arith-oracle"}
# Fresh problems like the weak ones come from a seed stream the seed set and the held-out sets never use.
WEAK_LIKE_SEED_OFFSET = 104729
# The family oracle's training problems come from a stream of their own (eval then leaves out any it draws too).
ORACLE_FAMILY_SEED_OFFSET = 1299709
# Draws per weak problem to find a problem of its family that is no seed or training problem and not yet drawn.
FRESH_DRAWS = 50


class ArithWorld(World):
    name = "arith"
    settings_model = ArithSettings
    default_roles = {"extractor": ORACLE, "generator": ORACLE, "judges": [ORACLE], "labeler": ORACLE,
                     "categorizer": ORACLE}
    engines = {"oracle": "sws.worlds.arith.oracle:OracleEngine"}
    # Arith answers are integers, which the math verifier compares exactly.
    verifier = MathVerifier()
    categories = tuple(CATEGORIES)
    # A category is what its families' problems take.
    category_descriptions = {category: "expressions that take " + ", ".join(category_concepts(category))
                             for category in CATEGORIES}
    teacher_note = (
        "The arith oracle played {roles} in this run. It is a rule-based stand-in for teacher models: it answers "
        "the same prompts from the arithmetic world's rules (with configurable noise), so the prompts, parsers and "
        "filters run for real, but no language model wrote or judged these problems."
    )

    def settings(self, cfg: PipelineConfig) -> ArithSettings:
        return cfg.world_settings

    def setup_steps(self) -> list[PipelineStep]:
        return [PipelineStep("bootstrap policy", self.bootstrap_step, self.bootstrap_would_run),
                PipelineStep("seed set", self.seed_set_step)]

    def bootstrap_step(self, cfg: PipelineConfig, run_dir: Path, force: bool) -> Path:
        """Build (or reuse from ~/.cache/sws) the warm-started tiny policy that initial training starts from."""
        return self.built_policy(cfg).build()

    def bootstrap_would_run(self, cfg: PipelineConfig) -> str | None:
        return None if self.built_policy(cfg).cached() is not None else "the tiny policy is not built (or cached) yet"

    def seed_input(self, run_dir: Path) -> Path:
        return RunDir(run_dir).seed_file(self.name)

    def seed_set_step(self, cfg: PipelineConfig, run_dir: Path, force: bool) -> StageResult:
        """Draw the seed problems (`arith.n_seed_problems` of `arith.seed_categories` and `arith.seed_levels`)
        for `sws prepare` to read."""
        from sws import runner
        from sws.worlds.arith.steps import SEED_SET

        return runner.run_stage(SEED_SET, cfg, run_dir, force)

    def policy_prompt(self, problem: str) -> dict[str, Any]:
        return policy_prompt(problem)

    def built_policy(self, cfg: PipelineConfig) -> BuiltPolicy:
        from sws.worlds.arith.bootstrap import (
            bootstrap_policy,
            bootstrap_settings,
            cached_bootstrap_policy,
            settings_hash,
        )

        settings = self.settings(cfg)
        # The hash of everything that decides the built weights, the float environment included: a policy built
        # under other kernels is another policy, and the arm trained from it another run.
        built = settings_hash(bootstrap_settings(settings.bootstrap_steps, cfg.seed, settings.misconception_rate))
        identity = {"bootstrap_steps": settings.bootstrap_steps, "misconception_rate": settings.misconception_rate,
                    "policy": built}
        return BuiltPolicy(
            identity=identity,
            build=lambda: bootstrap_policy(steps=settings.bootstrap_steps, seed=cfg.seed,
                                           misconception_rate=settings.misconception_rate),
            cached=lambda: cached_bootstrap_policy(settings.bootstrap_steps, cfg.seed, settings.misconception_rate),
        )

    def synthesizer(self, cfg: PipelineConfig) -> BuiltPolicy:
        from sws.worlds.arith.bootstrap import settings_hash
        from sws.worlds.arith.synthesizer import (
            bootstrap_synthesizer,
            cached_synthesizer,
            synthesizer_settings,
        )

        steps = cfg.cotrain.synthesizer_bootstrap_steps
        return BuiltPolicy(identity={"synthesizer": settings_hash(synthesizer_settings(steps, cfg.seed))},
                           build=lambda: bootstrap_synthesizer(steps, cfg.seed),
                           cached=lambda: cached_synthesizer(steps, cfg.seed))

    def truth(self, problem: str) -> Truth:
        truth = solve(problem)
        if truth.kind != "ok" or truth.answer is None:
            return Truth(truth.kind if truth.kind != "ok" else "unanswerable")
        return Truth(None, truth.answer, truth.category, tuple(truth.concepts))

    def fresh_problems(self, cfg: PipelineConfig, seed_problems: pl.DataFrame, n_per_category: int,
                       exclude: set[str] = frozenset()) -> pl.DataFrame:
        return heldout_problems(n_per_category, cfg.seed, seed_problems, self.settings(cfg).seed_levels,
                                exclude)

    def heldout_set(self, name: str, cfg: PipelineConfig, seed_problems: pl.DataFrame,
                    exclude: set[str] = frozenset()) -> pl.DataFrame | None:
        """`arith`: `arith.n_eval_per_category` fresh problems of each seed category at the seed levels (like the
        seed set, so training on it can move them), none of them a seed problem or one whose `problem_key` is in
        `exclude`."""
        if name != "arith":
            return None
        return self.fresh_problems(cfg, seed_problems, self.settings(cfg).n_eval_per_category, exclude)

    def weak_like_set(self, cfg: PipelineConfig, problems: pl.DataFrame, weakness: pl.DataFrame,
                      exclude: set[str]) -> pl.DataFrame | None:
        """`arith.n_weak_like` fresh problems of the weak problems' families (same shape, level and concepts),
        one per weak problem in turn, so a family gets a share as large as its share of the weak problems. None
        is the text (`problem_key`) of a seed problem or of `exclude`."""
        return family_problems(problems, weakness, self.settings(cfg).n_weak_like, exclude,
                               random.Random(cfg.seed + WEAK_LIKE_SEED_OFFSET), "like")

    def oracle_family_set(self, cfg: PipelineConfig, problems: pl.DataFrame, weakness: pl.DataFrame,
                          n: int) -> pl.DataFrame | None:
        """`n` fresh problems of the weak problems' families drawn as `weak_like_set` draws its own, from a seed
        stream of their own: the ideal targeted training data."""
        return family_problems(problems, weakness, n, set(), random.Random(cfg.seed + ORACLE_FAMILY_SEED_OFFSET),
                               "family")

    def selection_pool(self, cfg: PipelineConfig, run_dir: Path, force: bool = False) -> Path:
        """`arith.n_pool_problems` fresh problems of every family, none a seed or held-out problem."""
        from sws import runner
        from sws.worlds.arith.steps import POOL

        runner.run_stage(POOL, cfg, run_dir, force)
        return RunDir(run_dir).pool_file(self.name)

    def family_of(self, problem: str) -> str | None:
        return family_of(problem)

    def category_shows(self, category: str, concepts: Sequence[str]) -> bool | None:
        if category not in CATEGORIES:
            return None
        return {normalized(concept) for concept in concepts} <= category_vocabulary(category)

    def eval_identity(self, cfg: PipelineConfig) -> dict[str, Any]:
        settings = self.settings(cfg)
        return {"n_eval_per_category": settings.n_eval_per_category, "n_weak_like": settings.n_weak_like}

    def add_commands(self, group: Any, command: Any) -> None:
        from sws.worlds.arith.commands import add_commands

        add_commands(group, command)


WORLD = ArithWorld()


def family_problems(problems: pl.DataFrame, weakness: pl.DataFrame, wanted: int, exclude: set[str],
                    rng: random.Random, id_prefix: str) -> pl.DataFrame | None:
    """Up to `wanted` fresh problems of the weak problems' families, one per weak problem in turn (a weak problem
    whose family runs out of fresh problems drops out), none of them a seed problem or in `exclude` (by
    `problem_key`, commuted twins included); None without a `family` column."""
    if "family" not in problems.columns:
        return None
    weak = problems.join(weakness.filter(pl.col("weak")).select("problem_id"), on="problem_id", how="semi")
    taken = exclude | {problem_key(text) for text in problems["problem"]}
    rows: list[dict[str, str]] = []
    drawing = list(weak.select("problem_id", "family").iter_rows())
    while drawing and len(rows) < wanted:
        still_fresh = []  # weak problems whose family can still make a problem not yet taken
        for problem_id, family_name in drawing:
            if len(rows) == wanted:
                break
            candidates = (sample_problem(FAMILY_BY_NAME[family_name], rng) for _ in range(FRESH_DRAWS))
            fresh = next((candidate for candidate in candidates if problem_key(candidate.problem) not in taken),
                         None)
            if fresh is None:
                continue
            still_fresh.append((problem_id, family_name))
            taken.add(problem_key(fresh.problem))
            rows.append({"problem_id": f"{id_prefix}-{len(rows)}-{problem_id}", "problem": fresh.problem,
                         "answer": fresh.answer, "category": fresh.category})
        drawing = still_fresh
    return pl.DataFrame(rows, schema=PROBLEM_SET_SCHEMA)
