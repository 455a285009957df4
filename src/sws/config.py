"""Pipeline configuration: pydantic models of a pipeline YAML, with CLI overrides.

A run directory keeps its resolved configuration in `config.yaml`; commands load it (or the defaults), apply the
options given on the command line, and write it back, so every stage of a run sees the same settings.
Unknown keys are errors that name the key.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializeAsAny,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from sws import safe_yaml
from sws.arms import CHECKPOINTS
from sws.arms import NAMES as ARM_NAMES
from sws.atomic_files import write_text
from sws.cotrain.arms import COTRAIN_ARM_NAMES
from sws.cotrain.backend import CotrainBackendConfig
from sws.errors import UserError
from sws.presets import pipeline_file, preset_names
from sws.run_dir import RunDir
from sws.world import engine_world, get_world, world_names


class Section(BaseModel):
    # NaN passes every `<=` check as False, so a NaN threshold would silently change what a rule selects.
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class EngineConfig(Section):
    """One role's model: which engine runs it, which model, engine options and default sampling."""

    # How the model runs: vllm, openai, hf, or a world's own (the arith oracle); see docs/engines.md.
    engine: str
    # The model: a Hugging Face id or folder, or the server's model name.
    model: str
    # Engine options (vllm.LLM arguments, base_url, batch_size, ...), passed to the engine as they are.
    options: dict[str, Any] = Field(default_factory=dict)
    # Sampling temperature of the role's requests.
    temperature: float = Field(0.7, ge=0)
    # A reply that does not count is asked again at this temperature when `temperature` is 0: at 0 a new seed
    # gets the same reply. Above 0, retries keep `temperature`.
    retry_temperature: float = Field(0.7, gt=0)
    # Nucleus sampling: the probability mass sampled from.
    top_p: float = Field(1.0, gt=0, le=1)
    # Longest reply, in tokens; a reply cut off here is counted as truncated.
    max_tokens: int = Field(1024, ge=1)


class EmbedderConfig(Section):
    # sentence-transformers model for concept similarity, near-duplicates and contamination.
    model: str = "all-MiniLM-L6-v2"
    # Texts per encoding batch.
    batch_size: int = Field(256, ge=1)


class RolesConfig(Section):
    """The models of the method. A teacher role left out takes its world's default (`World.default_roles`); a
    world without a built-in teacher (math) needs it set, which `require_roles` checks before any model is called."""

    # Lists the concepts of each weak problem (extract).
    extractor: EngineConfig | None = None
    # Writes a problem from each concept set (generate).
    generator: EngineConfig | None = None
    # Rate each generated problem perfect / acceptable / bad (rate); one or more.
    judges: list[EngineConfig] | None = Field(None, min_length=1)
    # Answers each rated problem several times; the consistent answer is its label (label).
    labeler: EngineConfig | None = None
    # An empty model means the run's initial checkpoint (train/initial/final).
    policy: EngineConfig = Field(default_factory=lambda: EngineConfig(engine="hf", model="", temperature=1.0))
    embedder: EmbedderConfig = Field(default_factory=EmbedderConfig)
    # Labels problems without a category (`prepare.categorize`), in `sws prepare` and in `sws select`'s pool.
    categorizer: EngineConfig | None = None
    # Solves each labeled problem again without seeing the label (`sws synthesize --sub-steps audit`); best a
    # different model from the labeler. None: no audit (unless audit.enabled asks for one).
    auditor: EngineConfig | None = None


class PrepareConfig(Section):
    # Seed set: a JSON list, JSONL or Parquet file of problems; None: the world's own seed set.
    input: str | None = None
    # Field layout of a known file (math, math500, aime24, aime25, gsm8k); None: guessed from its name.
    preset: str | None = None
    # Field holding the problem text; None: the preset's, else the first common name present.
    problem_field: str | None = None
    # Field holding the reference answer; None: the preset's, else the first common name present.
    answer_field: str | None = None
    # Field holding the category; None: the preset's, or a common name; rows without one are `uncategorized`.
    category_field: str | None = None
    # Field holding a problem id; None: the preset's, else a hash of the problem text (stable across runs).
    id_field: str | None = None
    # The categories a categorizer may give; None: the world's list.
    categories: list[str] | None = None
    # true: the categorizer labels rows without a category with one of `categories` (None: the world's list);
    # "all": every row, whatever its input category.
    categorize: bool | Literal["all"] = False
    # A reply outside the list, unparsed or cut off is asked again (new seed; at temperature 0, the categorizer's
    # retry_temperature) up to this many times; then the row stays `uncategorized`.
    categorize_retries: int = Field(2, ge=0)
    # true: the categorize prompt shows the world's example problem of each listed category with the reply it
    # expects (a few-shot block; the math world has one per MATH subject).
    categorize_examples: bool = False
    # A seeded random sample of this many of the kept problems (their order kept): a small-scale run of a large
    # seed set, where the policy must see each seed problem several times for its accuracy trajectory.
    max_problems: int | None = Field(None, ge=1)


class IngestConfig(Section):
    """`sws ingest`: another trainer's rollout log (`format` + `path`) read into rollouts.parquet."""

    # The rollout log's format: verl (its rollout dumps) or acc_records (SwS's acc_records.json).
    format: Literal["verl", "acc_records"] | None = None
    # verl: the trainer.rollout_data_dir folder; acc_records: the acc_records.json file.
    path: str | None = None
    # The file the trainer read, when its `index` is not the row position in problems.parquet.
    seed_file: str | None = None


class IdentifyConfig(Section):
    """`sws identify`: weak <=> n_record >= min_records, max_acc <= max_acc and slope <= max_slope; each `<=`
    becomes `<` with its own strict flag.

    The authors' failure record follows `max_acc <= 0.5 and slope <= 0`, so a never-solved problem (all zeros,
    slope exactly 0) is weak; `strict_slope` would drop it.
    """

    # Weak: the problem's best accuracy over training is at most this.
    max_acc: float = Field(0.5, ge=0, le=1)
    # An accuracy trajectory's OLS slope lies in [-1, 1].
    max_slope: float = Field(0.0, ge=-1, le=1)
    # Weak only with at least this many accuracy records over training.
    min_records: int = Field(1, ge=0)
    # true: max_acc < the threshold instead of <=.
    strict_max_acc: bool = False
    # true: slope < max_slope instead of <= (drops never-solved problems).
    strict_slope: bool = False

    @model_validator(mode="before")
    @classmethod
    def _one_strict_flag_per_threshold(cls, data: Any) -> Any:
        """An older config's `strict: X` made both inequalities strict (X true) or neither: the same as both flags."""
        if isinstance(data, dict) and "strict" in data:
            data = dict(data)
            strict = data.pop("strict")
            for flag in ("strict_max_acc", "strict_slope"):
                if data.setdefault(flag, strict) != strict:
                    raise ValueError(f"'strict' ({strict}) and '{flag}' ({data[flag]}) disagree; 'strict' is the "
                                     "old spelling of both strict_max_acc and strict_slope: remove it")
        return data


class SynthesizeConfig(Section):
    """`sws synthesize`: extract, combine, generate, rate, label (DESIGN §1 stage 3)."""

    # Concept sets (problems to generate) in all, split over categories by their share of weak problems.
    budget: int = Field(200, ge=0)
    # Concepts the extractor lists per weak problem.
    concepts_per_problem: int = Field(5, ge=1)
    # Concepts per sampled concept set; None: the median length of the category's weak problems' concept lists.
    set_size: int | None = Field(None, ge=1)
    # draws: the budget is that many independent draws from each category's concept distribution, a set drawn
    # twice asked for twice (as another variant); distinct: only distinct sets (see fill_budget), which in a
    # small category enumerates nearly every combination instead of following the distribution.
    sampling: Literal["draws", "distinct"] = "draws"
    # Temperature of concept sampling (lower: the most related concepts).
    temperature: float = Field(0.2, gt=0)
    # Weight of co-occurrence (concepts listed by the same weak problems) in concept sampling.
    cooc_weight: float = Field(1.0, ge=0)
    # Weight of embedding similarity to the concepts chosen so far in concept sampling.
    sim_weight: float = Field(1.0, ge=0)
    # Difficulty levels the generator is asked for; each concept set is drawn with one of them.
    levels: list[str] = Field(default_factory=lambda: ["easy", "medium", "hard"], min_length=1)
    # With sampling: distinct, a category whose concepts cannot supply its quota of distinct concept sets (a small concept vocabulary,
    # like the arith world's) fills it with its sets at other levels, then with new instances of them (the
    # generator is asked for another variant). false: the paper's one problem per distinct set.
    fill_budget: bool = True
    # Difficulty-adaptive regeneration, run by `sws filter`: for up to this many rounds, every labeled problem
    # the policy never solves goes back to the generator with a request for an easier problem on its concepts
    # (with adapt_harder, every problem it always solves asks for a harder one); each round's problems pass
    # rate, label and the band like the others. 0: the paper's single pass.
    adapt_rounds: int = Field(0, ge=0)
    # With adapt_rounds: a problem the policy always solves asks for a harder one.
    adapt_harder: bool = False
    # The untargeted-synthesis control (`sws untargeted`): the same synthesis and budget fed by random seed
    # problems instead of the weak ones, in `untargeted/`, trained as the arm `untargeted` like augmented.
    untargeted_arm: bool = False
    # Generated problems shorter than this (characters) are rejected.
    min_problem_chars: int = Field(10, ge=0)
    # Generated problems longer than this (tokens) are rejected.
    max_problem_tokens: int = Field(400, ge=1)
    # Generated problems at least this similar (normalised text) to another are near-duplicates.
    near_duplicate_threshold: float = Field(0.9, ge=0, le=1)
    # Shorter problems (normalised) are duplicates only when equal; see sws.near_duplicates.
    near_duplicate_min_chars: int = Field(40, ge=0)
    # JSON / JSONL / Parquet files with a `problem` (or `question`) field, e.g. benchmark test sets; generated
    # problems too close to one of them (or to the seed set) are rejected.
    reference_files: list[str] = Field(default_factory=list)
    # Folder of replacement prompt templates (extract.md, generate.md, rate.md, label.md); None: the shipped ones.
    prompt_dir: str | None = None
    # Ratings each judge gives each problem.
    ratings_per_judge: int = Field(1, ge=1)
    # A judgement without a verdict below an analysis, or cut off, is asked again (new seed; at temperature 0, the
    # judge's retry_temperature) up to this many times.
    rate_retries: int = Field(2, ge=0)
    # Kept when at least this share of all verdicts is perfect.
    min_perfect_ratio: float = Field(0.5, ge=0, le=1)
    # true: a problem with a bad verdict may still be kept.
    allow_bad: bool = False
    # Answers the labeler samples per problem.
    label_samples: int = Field(8, ge=1)
    # Kept when the largest group of equal answers holds at least this share of the samples.
    min_consistency: float = Field(0.5, ge=0, le=1)
    # The labeler is weaker than the policy: its consistency must exceed 50 % and the policy must agree.
    weak_to_strong: bool = False
    # With weak_to_strong: the policy's samples per problem.
    student_samples: int = Field(8, ge=1)
    # With weak_to_strong: the share of the policy's samples that must reach the label.
    student_min_agreement: float = Field(0.25, ge=0, le=1)
    # Problems per shard: a crash loses at most one shard's model calls.
    shard_size: int = Field(256, ge=1)
    # A generated problem whose embedding (roles.embedder) has at least this cosine similarity with a benchmark
    # problem (reference_files and eval.benchmarks) is rejected as `contaminated`; None: by text only.
    contamination_similarity: float | None = Field(0.8, gt=0, le=1)
    # Early stopping: the labeler's samples come in waves of this many single-sample requests (seeds seed,
    # seed + 1, ..., as n_mode fanout sends them), and a problem gets no more once its keep-or-reject decision
    # (and its label) can no longer change. None: all label_samples in one request.
    label_wave: int | None = Field(None, ge=1)
    # `sws synthesize --estimate`: the share of the concept sets its pilot runs through generate and the later
    # steps (extract runs on every weak problem, as the real run does).
    estimate_share: float = Field(0.05, gt=0, le=1)
    # Spending caps: the run stops cleanly between shards once the tokens (prompt + completion) or the cost
    # (from `pricing`) of the steps it runs reach the cap; the same command with a higher cap continues.
    max_tokens: int | None = Field(None, ge=1)
    # Spending cap in dollars (see max_tokens and `pricing`).
    max_cost: float | None = Field(None, gt=0)


class FilterConfig(Section):
    """`sws filter`: keep labeled problems whose accuracy under the initial policy lies in `band` (inclusive)."""

    # [low, high]: kept when the initial policy's accuracy lies in it (inclusive).
    band: tuple[float, float] = (0.25, 0.75)
    # Policy samples per problem for its accuracy.
    rollouts: int = Field(8, ge=1)
    # None: train.max_completion_length, so a solution the policy may write in training is not cut short here
    # (a cut-off one is scored wrong, or on an intermediate answer). Read it through `filter_max_tokens`.
    max_tokens: int | None = Field(None, ge=1)
    # Problems per shard: a crash loses at most one shard's grading (the request cache keeps its samples).
    shard_size: int = Field(256, ge=1)
    # Early stopping: the policy's rollouts come in waves of this many single-sample requests (seeds seed,
    # seed + 1, ...), and a problem gets no more once its accuracy is sure to land inside or outside the band
    # (problems still at accuracy 0 draw all, for the adaptive rounds and policy_disagrees). None: all at once.
    wave: int | None = Field(None, ge=1)

    @field_validator("band")
    @classmethod
    def _band_is_an_interval(cls, band: tuple[float, float]) -> tuple[float, float]:
        if not 0.0 <= band[0] <= band[1] <= 1.0:
            raise ValueError(f"need 0 <= low <= high <= 1, got {list(band)}; give two accuracies like [0.25, 0.75]")
        return band


class SelectConfig(Section):
    """`sws select`: the pool problems nearest to the weak ones, `budget` split over categories by fail ratio."""

    # A JSON list, JSONL or Parquet file of problems, read with `prepare`'s field settings; None: the pool the
    # world draws itself (`World.selection_pool`; arith: `arith.n_pool_problems` fresh problems).
    pool: str | None = None
    # Problems to select in all; None: mix.dose when set, else as many as the band filter kept (filtered.parquet),
    # so selection and synthesis add the same number of problems.
    budget: int | None = Field(None, ge=0)
    # The selected problems the initial policy solves too rarely or too often (outside filter.band, with
    # filter.rollouts samples each) are dropped, as `sws filter` drops synthetic ones, and the next nearest
    # taken instead: on by default, so selection against synthesis compares retrieval with synthesis only.
    band: bool = True
    # The selected arm: `sws run` also selects, mixes seed ∪ selected (`selected_mix.parquet`) and trains it from
    # the initial policy for train.augmented_steps (`train/selected`), beside augmented (seed ∪ synthetic) and
    # baseline (seed only); eval, the report and `sws compare` then compare the three.
    arm: bool = False
    # The random-selection control (paper §4.3): as many pool problems as the selected arm took, drawn at random
    # (the run's seed) from the whole pool, band-filtered alike, trained as the arm `random_selected`.
    random_arm: bool = False


class OracleFamilyConfig(Section):
    """The upper-bound arms: seed ∪ fresh problems of the weak problems' own families (where the world can draw
    them), the ideal targeted data against which the synthetic arm's gain is measured."""

    # Train the arms `oracle_family` (seed ∪ n fresh family problems) and `oracle_family_large` (seed ∪
    # large_factor × n of them, the first n being the smaller arm's) beside the others, as long as augmented.
    arm: bool = False
    # Problems added; None: mix.dose when set, else as many as the band filter kept (filtered.parquet).
    n: int | None = Field(None, ge=1)
    # How many times n problems the larger arm, oracle_family_large, adds.
    large_factor: int = Field(3, ge=2)


class MixConfig(Section):
    """`sws mix`: which new problems join the seed set (each only when its stage has run)."""

    # synthetic (the augmented arm's problems) and/or selected (the selected arm's).
    sources: list[Literal["synthetic", "selected"]] = Field(default_factory=lambda: ["synthetic", "selected"],
                                                            min_length=1)
    # Problems every arm adds to the seed set (synthetic, untargeted, selected, random selection, the family
    # oracle): a source with more keeps this many drawn at random (the run's seed), the others rejected as
    # `beyond_dose`, so the arms differ in what they add, not in how much. None: all that passed.
    dose: int | None = Field(None, ge=1)


class VerlConfig(Section):
    """`train.trainer: verl`: where verl runs and its GPU settings; `overrides` passes Hydra overrides unchanged."""

    # verl's own interpreter (`make install-verl`), or a cluster image's; relative paths are from the working dir.
    python: str = ".venv-verl/bin/python"
    # GPUs verl uses on each node.
    n_gpus_per_node: int = Field(8, ge=1)
    # Nodes verl trains on.
    nnodes: int = Field(1, ge=1)
    # Problems per PPO update (verl's ppo_mini_batch_size); None: train.batch_size, one update per step.
    mini_batch_size: int | None = Field(None, ge=1)
    # Sequences per GPU per forward pass (actor update and log-prob passes).
    micro_batch_size_per_gpu: int = Field(4, ge=1)
    # Longest prompt, in tokens (verl's data.max_prompt_length).
    max_prompt_length: int = Field(1024, ge=1)
    # KL to the reference policy as a loss term with coefficient train.beta (loads a reference model).
    use_kl_loss: bool = False
    # Entropy bonus coefficient of the actor loss.
    entropy_coeff: float = Field(0.0, ge=0)
    # GPUs per vLLM rollout engine.
    tensor_parallel_size: int = Field(1, ge=1)
    # Share of each GPU's memory vLLM's rollout engine may take.
    gpu_memory_utilization: float = Field(0.6, gt=0, le=1)
    # Further Hydra overrides for verl, KEY=VALUE, passed unchanged (not those sws sets).
    overrides: list[str] = Field(default_factory=list)


class TrlConfig(Section):
    """`train.trainer: trl` on GPUs: how many processes train (one per GPU) and the memory a device offers."""

    # More than 1: `sws train` runs TRL with `accelerate launch --multi_gpu --num_processes N` (launch.sh).
    num_processes: int = Field(1, ge=1)
    # GB (1e9 bytes) per device for the check that a micro-batch fits; None: CUDA device 0's free memory, or no
    # check on a CPU.
    device_memory_gb: float | None = Field(None, gt=0)


DEFAULT_REWARD = "correct"


class TrainConfig(Section):
    """`sws train`: GRPO settings (TRL or verl); `extra` passes further `trl.GRPOConfig` fields through unchanged."""

    # trl (in-process, CPU or GPUs) or verl (its own environment, GPUs).
    trainer: Literal["trl", "verl"] = "trl"
    # Outside the arith world: the model `sws train initial` starts from (HF id or folder).
    init_model: str = ""
    # The reward, by its registered name (`sws.training.rewards`); `correct`: 1 for a right final answer, else 0.
    reward: str = DEFAULT_REWARD
    # GRPO steps of the initial run, whose log identifies the weak problems.
    initial_steps: int = Field(200, ge=1)
    # GRPO steps of the augmented (and selected) run from the initial policy.
    augmented_steps: int = Field(200, ge=1)
    # None: as many as augmented_steps, the comparison the paper makes.
    baseline_steps: int | None = Field(None, ge=1)
    # Problems per step; each is rolled out num_generations times.
    batch_size: int = Field(8, ge=1)
    # Rollouts per problem (GRPO's group size).
    num_generations: int = Field(8, ge=2)
    # Constant (no decay). On the arith tiny policy 1e-4 raises greedy accuracy; 5e-4 lowers it.
    learning_rate: float = Field(1e-4, gt=0)
    # TRL: completions per device per forward/backward pass; gradient accumulation makes up the step's
    # batch_size x num_generations completions. None: each device's whole share in one pass. (verl's is
    # train.verl.micro_batch_size_per_gpu.)
    micro_batch_size: int | None = Field(None, ge=1)
    # Longest rollout, in tokens.
    max_completion_length: int = Field(24, ge=1)
    # Rollout temperature (also the filter's and select's sampling temperature).
    temperature: float = Field(1.0, gt=0)
    # KL coefficient to the reference policy; 0: no KL term.
    beta: float = Field(0.0, ge=0)
    # Checkpoint every this many steps (a rerun resumes from the last).
    save_steps: int = Field(50, ge=1)
    # TRL generates rollouts with vLLM (colocated) instead of transformers.
    use_vllm: bool = False
    # Train augmented and baseline at once, one process each. None: yes on a CPU with a core per run.
    side_by_side: bool | None = None
    report_to: Literal["none", "tensorboard", "wandb", "mlflow"] = Field(
        "none", description="Experiment tracker the trainer logs to, into train/<arm>/tracking/ (wandb offline).")
    # Further trl.GRPOConfig fields, passed through unchanged (not those sws sets).
    extra: dict[str, Any] = Field(default_factory=dict)
    trl: TrlConfig = Field(default_factory=TrlConfig)
    verl: VerlConfig = Field(default_factory=VerlConfig)
    # [low, high]: augmented training keeps only rollout groups whose accuracy lies in the band (inclusive), the
    # SwS authors' dynamic sampling; the rollout log still records every group, with `dropped`. None: keep all.
    online_filter: tuple[float, float] | None = None
    # Which arms filter online: every arm that continues from the initial policy alike (so the filter is no
    # difference between arms), or only augmented, as the authors' scripts do (a confound the report names).
    online_filter_arms: Literal["continuations", "augmented"] = "continuations"

    @field_validator("online_filter")
    @classmethod
    def _filter_is_a_band(cls, band: tuple[float, float] | None) -> tuple[float, float] | None:
        if band is not None and not 0.0 <= band[0] <= band[1] <= 1.0:
            raise ValueError(f"need 0 <= low <= high <= 1, got {list(band)}; give two accuracies like [0.125, 0.875]")
        return band

    @model_serializer(mode="wrap")
    def _later_fields_only_when_chosen(self, handler: Any) -> dict[str, Any]:
        """`reward` and `report_to` are left out while they are the default, so the configs of runs from before
        they could be chosen, and the hashes of the stages that read them (training, the report), stay what they
        were."""
        data = handler(self)
        for name, default in (("reward", DEFAULT_REWARD), ("report_to", "none")):
            if data.get(name) == default:
                del data[name]
        return data


class BenchmarkConfig(Section):
    """One entry of `eval.benchmarks` written as a mapping: a shipped or world set by `name`, or a `file` (JSON,
    JSONL or Parquet with problem and answer fields, read as `sws prepare` reads a seed file) named `name`."""

    name: str = Field(min_length=1)
    file: str | None = None
    # None: eval.k.
    k: int | None = Field(None, ge=1)
    problem_field: str | None = None
    answer_field: str | None = None


class EvalConfig(Section):
    """`sws eval`: held-out sets (arith, math500, aime24, aime25, gsm8k, or files), the weak problems and the seed
    set. `base` among the checkpoints is train.init_model, before any training."""

    # Held-out sets: names (arith, math500, aime24, aime25, gsm8k) or {name, file} entries.
    benchmarks: list[str | BenchmarkConfig] = Field(default_factory=lambda: ["arith"])
    # Of `sws.arms.CHECKPOINTS`: `start` (the policy the world builds, when built) and every arm.
    checkpoints: list[Literal[CHECKPOINTS]] = Field(default_factory=lambda: ["start", *ARM_NAMES])
    # The seed set under every checkpoint gives each training set's teachability in the report.
    seed_set: bool = True
    # Samples per benchmark problem (Avg@k).
    k: int = Field(8, ge=1)
    # Samples per weak problem: the weak set is small and fixed, so its Avg@k needs more samples than a
    # benchmark's to measure a policy to about a point.
    weak_k: int = Field(32, ge=1)
    # Sampling temperature of evaluation.
    temperature: float = Field(1.0, gt=0)
    # Longest evaluation answer, in tokens.
    max_tokens: int = Field(32, ge=1)
    # Requests per shard: a crash loses at most one shard (the request cache keeps the rest).
    shard_size: int = Field(1024, ge=1)


class RoleResources(Section):
    """How a role runs on Ray: engine replicas (actors, or vLLM engines) and GPUs per replica."""

    # Engine replicas (Ray actors, or vLLM engines) of the role.
    replicas: int = Field(1, ge=1)
    # GPUs per replica.
    gpus: float = Field(0, ge=0)


class ExecutorConfig(Section):
    """Where the LLM-heavy steps run: `local` (this process) or `ray` (a Ray cluster at `address`).

    `roles` is keyed by role name (extractor, generator, judges, labeler, policy); a role left out gets one
    CPU replica. None of this changes what a step computes, so no stage reruns when it changes.
    """

    # local (this process) or ray (a Ray cluster at address).
    kind: Literal["local", "ray"] = "local"
    # `auto`: the cluster `ray start --head` started on this machine or that RAY_ADDRESS names; `local`: a
    # private one for this command; `host:port`: the head node's GCS address.
    address: str = "auto"
    roles: dict[Literal["extractor", "generator", "judges", "labeler", "policy", "auditor", "categorizer"],
                RoleResources] = Field(
        default_factory=dict)


class GradingConfig(Section):
    """Grading worker processes: `workers` (None: one per CPU, `os.cpu_count()`) and the deadline per pair."""

    # Grading processes; None: one per CPU.
    workers: int | None = Field(None, ge=1)
    # Seconds a comparison may take; past it the pair counts as not graded.
    deadline_s: float = Field(5.0, gt=0)


class ReportConfig(Section):
    """`sws report`: how much of each plot to draw."""

    # Weak problems whose accuracy trajectory the report plots at most (shared equally by the categories).
    max_trajectories: int = Field(60, ge=0)


class AuditConfig(Section):
    """The label audit (`sws.stages.audit`): the auditor answers each labeled problem `samples` times; a label
    its answers contradict in more than `max_disagreement` of them is quarantined as `audit_disagrees`."""

    # None: on when roles.auditor is set.
    enabled: bool | None = None
    # Auditor answers per labeled problem.
    samples: int = Field(4, ge=1)
    # A label contradicted by more than this share of the answers is quarantined.
    max_disagreement: float = Field(0.5, ge=0, le=1)
    # Audit this many labeled problems drawn at random (seeded), to estimate the wrong-label rate cheaply; the
    # others pass unaudited. None: every one.
    sample: int | None = Field(None, ge=1)
    # Reject in the filter a problem whose policy samples all agree on one answer other than its label.
    policy_disagrees: bool = True


class Price(Section):
    """What a role's model costs: dollars per million input (prompt) and output (completion) tokens."""

    # Dollars per million prompt tokens.
    input: float = Field(0.0, ge=0)
    # Dollars per million completion tokens.
    output: float = Field(0.0, ge=0)


class StopWhenConfig(Section):
    """`rounds.stop_when`: end the loop after a round when the share of earlier weak problems it resolved is no
    higher than the round before's (`resolved_stops_rising`), or when its synthesis kept (after the band filter)
    fewer than `min_kept` problems."""

    # Stop when a round resolves no larger share of earlier weak problems than the round before.
    resolved_stops_rising: bool = False
    # Stop when a round's synthesis keeps fewer problems than this (after the band filter).
    min_kept: int = Field(0, ge=0)


class RoundsConfig(Section):
    """`sws run --rounds N`: round r + 1 identifies the weak problems of round r's augmented training log and
    trains on from its augmented checkpoint. `rounds: N` in a pipeline file is short for `rounds: {n: N}`."""

    # Rounds of the method; round r > 1 lives in RUN/rounds/<r>/.
    n: int = Field(1, ge=1)
    # A weak problem that was weak in the round before counts this many times in its category's budget share.
    persist_weight: float = Field(1.0, gt=0)
    # When the rounds end early.
    stop_when: StopWhenConfig = Field(default_factory=StopWhenConfig)
    # A fixed judge that rates each round's generated problems beside `roles.judges`, to measure self-rating.
    reference_judge: EngineConfig | None = None


class CotrainConfig(Section, CotrainBackendConfig):
    """SynCo co-training (`sws.cotrain`, docs/cotraining.md): a synthesizer and the reasoner trained by GRPO in
    one loop, per arm of `sws.cotrain.arms`. Each step S writes `batch_size` cards, R draws `rollouts` per valid one.
    Where the two policies train and how long a call to their server is waited for (`backend`, `synthesizer`,
    `reasoner`, `api_key_env`, `call_deadline_s`, `call_deadline_tokens_per_s`): `CotrainBackendConfig`."""

    # The arms `sws run` trains; none by default.
    arms: list[Literal[COTRAIN_ARM_NAMES]] = Field(default_factory=list)
    # `sws run` runs only the world's setup, prepare and the co-training arms (a co-training pipeline).
    only: bool = False
    # Co-training steps per arm; each updates the reasoner and, unless frozen, the synthesizer.
    steps: int = Field(40, ge=1)
    # Task cards the synthesizer writes per step (B; one GRPO group).
    batch_size: int = Field(8, ge=2)
    # Reasoner rollouts per task (K; one GRPO group per task).
    rollouts: int = Field(8, ge=2)
    # Tasks the reasoner trains on per step, in every arm alike (empty: batch_size; at least batch_size): the
    # step's valid cards, topped up with the arm's earlier accepted tasks, then seed problems.
    reasoner_tasks: int | None = Field(None, ge=2)
    # Adam learning rate of the synthesizer's GRPO update.
    synthesizer_learning_rate: float = Field(1e-4, gt=0)
    # Adam learning rate of the reasoner's GRPO update.
    reasoner_learning_rate: float = Field(1e-4, gt=0)
    # The synthesizer's reward for a task the reasoner solves in a share sr of its rollouts.
    teachability: Literal["synco", "azr", "rzero"] = "synco"
    # Reject a card without a worked solution (`no_solution`). A card's solution, required or not, makes its
    # reliability SynCo's: 1 when the solution's final answer agrees with the label, else 0.
    require_solution: bool = False
    # Sampling temperature of the synthesizer's cards.
    synthesizer_temperature: float = Field(1.0, gt=0)
    # Sampling temperature of the reasoner's rollouts.
    reasoner_temperature: float = Field(1.0, gt=0)
    # Token limit of one card.
    synthesizer_max_tokens: int = Field(64, ge=1)
    # Token limit of one rollout.
    reasoner_max_tokens: int = Field(16, ge=1)
    # System prompt given to the synthesizer (chat models; empty: none).
    synthesizer_system_prompt: str = ""
    # System prompt given to the reasoner (chat models; empty: none).
    reasoner_system_prompt: str = ""
    # Supervised steps of the arith synthesizer's warm start (cached by its settings).
    synthesizer_bootstrap_steps: int = Field(300, ge=1)
    # Held-out tasks per category the reasoner answers at the end, `validation_rollouts` times each.
    validation_per_category: int = Field(8, ge=0)
    # Rollouts per held-out task.
    validation_rollouts: int = Field(4, ge=1)
    # The reasoner's batch is trimmed, by whole rollout groups, to a multiple of this.
    data_parallel_size: int = Field(1, ge=1)

    @model_validator(mode="after")
    def _every_valid_card_solved(self) -> CotrainConfig:
        if self.reasoner_tasks is not None and self.reasoner_tasks < self.batch_size:
            raise ValueError(f"reasoner_tasks ({self.reasoner_tasks}) is below batch_size ({self.batch_size}): "
                             "every valid card of a step is solved, so set reasoner_tasks to at least batch_size")
        return self


class PipelineConfig(Section):
    # numpy, torch and the trainers take seeds of different widths; every one of them takes 32 bits.
    seed: int = Field(0, ge=0, lt=2**32)
    # The kind of problem (arith, math, or a world of your own); its section has its name.
    world: str = "arith"
    # The world's own section, written under the world's name (`arith:`) and checked by its settings model.
    world_settings: SerializeAsAny[Section] | None = None
    # Where this pipeline has never been run (a preset written for hardware it has not run on), said first by
    # `sws run --dry-run`; empty: nothing to say.
    not_run: str = ""
    roles: RolesConfig = Field(default_factory=RolesConfig)
    prepare: PrepareConfig = Field(default_factory=PrepareConfig)
    ingest: IngestConfig = Field(default_factory=IngestConfig)
    identify: IdentifyConfig = Field(default_factory=IdentifyConfig)
    synthesize: SynthesizeConfig = Field(default_factory=SynthesizeConfig)
    filter: FilterConfig = Field(default_factory=FilterConfig)
    select: SelectConfig = Field(default_factory=SelectConfig)
    mix: MixConfig = Field(default_factory=MixConfig)
    oracle_family: OracleFamilyConfig = Field(default_factory=OracleFamilyConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    report: ReportConfig = Field(default_factory=ReportConfig)
    executor: ExecutorConfig = Field(default_factory=ExecutorConfig)
    grading: GradingConfig = Field(default_factory=GradingConfig)
    audit: AuditConfig = Field(default_factory=AuditConfig)
    # Per role (extractor, generator, judges, labeler, auditor, categorizer, policy): the price of its tokens, which turns the
    # token counts of the manifests, funnel and report into money. A role left out is not priced.
    pricing: dict[Literal["extractor", "generator", "judges", "labeler", "auditor", "categorizer", "policy"],
                  Price] = Field(default_factory=dict)
    rounds: RoundsConfig = Field(default_factory=RoundsConfig)
    cotrain: CotrainConfig = Field(default_factory=CotrainConfig)

    @field_validator("rounds", mode="before")
    @classmethod
    def _rounds_count(cls, rounds: Any) -> Any:
        """`rounds: N` is `rounds: {n: N}`."""
        return {"n": rounds} if isinstance(rounds, int) and not isinstance(rounds, bool) else rounds

    @model_validator(mode="before")
    @classmethod
    def _world_parts(cls, data: Any) -> Any:
        """Fill the teacher roles left out with the world's defaults, and read the world's own section."""
        # Assignment to a field of a built config revalidates it with `roles` already a RolesConfig: leave it.
        if not isinstance(data, dict) or not isinstance(data.get("roles") or {}, dict):
            return data
        name = data.get("world", "arith")
        if not isinstance(name, str) or name not in world_names():
            raise ValueError(f"world {name!r} is not known; use one of: {', '.join(world_names())}")
        world = get_world(name)
        roles = dict(data.get("roles") or {})
        for role, default in world.default_roles.items():
            if roles.get(role) is None:
                roles[role] = default
        data = {**data, "roles": roles}
        for other in world_names():
            if other != name and other in data:
                # A run's config.yaml from before worlds owned their sections holds the arith defaults in any world.
                model = get_world(other).settings_model
                if model is not None and data[other] == model().model_dump(mode="json"):
                    data = {key: value for key, value in data.items() if key != other}
                    continue
                raise ValueError(f"section '{other}' belongs to world '{other}', not to this pipeline's world "
                                 f"'{name}'; remove it")
        if world.settings_model is not None and "world_settings" not in data:
            section = data.pop(name, None) or {}
            try:
                data["world_settings"] = world.settings_model.model_validate(section)
            except ValidationError as exc:
                raise ValueError(error_text(exc.errors()[0], (name,))) from None
        return data

    @model_validator(mode="after")
    def _arms_apart(self) -> PipelineConfig:
        """With the selected arm, augmented is the synthetic arm: it must not take the selected problems too."""
        if self.select.arm and "selected" in self.mix.sources:
            raise ValueError("select.arm trains seed ∪ selected as an arm of its own, so augmented must be seed ∪ "
                             "synthetic: set mix.sources: [synthetic]")
        if self.select.random_arm and not self.select.arm:
            raise ValueError("select.random_arm draws as many pool problems as the selected arm takes, so it needs "
                             "that arm: set select.arm: true")
        return self

    @property
    def filter_max_tokens(self) -> int:
        """The band filter's completion length: filter.max_tokens, else the training completion length."""
        return self.filter.max_tokens or self.train.max_completion_length

    @model_serializer(mode="wrap")
    def _world_section_under_its_name(self, handler: Any) -> dict[str, Any]:
        data = handler(self)
        settings = data.pop("world_settings", None)
        if settings is None:
            return data
        # Right after `world`, where a pipeline file has it.
        return {key: value for name, field in data.items()
                for key, value in ((name, field), *([(self.world, settings)] if name == "world" else []))}


TEACHER_ROLES = ("extractor", "generator", "judges", "labeler")
ROLE_SNIPPET = "roles: {%s: %s}"
ROLE_EXAMPLE = "{engine: openai, model: Qwen/Qwen2.5-7B-Instruct, options: {base_url: 'http://localhost:8000/v1'}}"


def require_roles(cfg: PipelineConfig, roles: Iterable[str], source: Path | str) -> None:
    """UserError naming every one of `roles` that is not set, else the first that asks an engine another world
    brings (the arith oracle outside the arith world)."""
    roles = list(dict.fromkeys(roles))
    unset = [role for role in roles if getattr(cfg.roles, role) is None]
    if unset:
        fields = ", ".join(f"'roles.{role}'" for role in unset)
        example = f"[{ROLE_EXAMPLE}]" if unset[0] == "judges" else ROLE_EXAMPLE
        raise UserError(f"{source}: {'fields' if len(unset) > 1 else 'field'} {fields} "
                        f"{'are' if len(unset) > 1 else 'is'} not set, and world '{cfg.world}' has no built-in "
                        f"teacher; add each, e.g. `{ROLE_SNIPPET % (unset[0], example)}`")
    for role in roles:
        value = getattr(cfg.roles, role)
        example = f"[{ROLE_EXAMPLE}]" if role == "judges" else ROLE_EXAMPLE
        for engine in value if isinstance(value, list) else [value]:
            owner = engine_world(engine.engine)
            if owner is not None and owner.name != cfg.world:
                raise UserError(f"{source}: field 'roles.{role}' uses the {engine.engine} engine, which only knows "
                                f"the {owner.name} world; set a real model, e.g. `{ROLE_SNIPPET % (role, example)}`")


def role_config(cfg: PipelineConfig, role: str) -> EngineConfig:
    """The engine config of a role named as in the pipeline YAML: `generator`, `policy`, `judges.1`, ..."""
    name, _, index = role.partition(".")
    roles = cfg.roles
    if name in TEACHER_ROLES or (name in ("auditor", "categorizer") and not index):
        require_roles(cfg, [name], "the pipeline config")
    names = ["extractor", "generator", *(f"judges.{i}" for i in range(len(roles.judges or []))), "labeler",
             *(["auditor"] if roles.auditor is not None else []),
             *(["categorizer"] if roles.categorizer is not None else []), "policy"]
    if name == "judges" and index.isdigit() and int(index) < len(roles.judges):
        return roles.judges[int(index)]
    if name in ("extractor", "generator", "labeler", "auditor", "categorizer", "policy") and not index:
        return getattr(roles, name)
    raise UserError(
        f"role '{role}' is not in the pipeline config (section 'roles'); "
        f"use one of: {', '.join(names)}"
    )


def error_text(error: Any, prefix: tuple[str, ...] = ()) -> str:
    """One pydantic error as a line naming the key (under `prefix`) and what is wrong with it."""
    where = ".".join(str(part) for part in (*prefix, *error["loc"])) or "(top level)"
    if error["type"] == "extra_forbidden":
        return f"unknown key '{where}'; remove it or check its spelling"
    return f"field '{where}': {error['msg']}"


def _first_error(exc: ValidationError, source: Path | str) -> UserError:
    # A misspelt key also leaves the field it meant missing; naming the misspelling says what to fix.
    error = next((error for error in exc.errors() if error["type"] == "extra_forbidden"), exc.errors()[0])
    if error["type"] == "value_error" and not error["loc"]:  # a whole-config rule, which words its own message
        return UserError(f"{source}: {error['ctx']['error']}")
    return UserError(f"{source}: {error_text(error)}")


def parse_config(data: dict[str, Any], source: Path | str) -> PipelineConfig:
    try:
        return PipelineConfig.model_validate(data or {})
    except ValidationError as exc:
        raise _first_error(exc, source) from None


# Settings that name files or folders. In a pipeline file a relative path is relative to that file, so a
# pipeline runs the same from any working directory. Model fields may also be hub ids, so a relative model
# path is taken from the pipeline's folder only when it exists there.
PATH_FIELDS = ("prepare.input", "ingest.path", "ingest.seed_file", "synthesize.prompt_dir", "select.pool")
PATH_LIST_FIELDS = ("synthesize.reference_files",)
MODEL_FIELDS = ("train.init_model", "roles.extractor.model", "roles.generator.model", "roles.labeler.model",
                "roles.policy.model", "roles.auditor.model")


def _resolved(value: Any, base: Path, only_if_exists: bool = False) -> Any:
    if not isinstance(value, str) or not value:
        return value
    path = Path(os.path.expandvars(value)).expanduser()
    if path.is_absolute():
        return str(path)
    candidate = (base / path).resolve()
    return str(candidate) if candidate.exists() or not only_if_exists else value


def _with_paths_relative_to(data: dict[str, Any], base: Path) -> dict[str, Any]:
    def edit(dotted: str, change: Any) -> None:
        *parents, leaf = dotted.split(".")
        node: Any = data
        for key in parents:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and leaf in node:
            node[leaf] = change(node[leaf])

    for dotted in PATH_FIELDS:
        edit(dotted, lambda value: _resolved(value, base))
    for dotted in PATH_LIST_FIELDS:
        edit(dotted, lambda values: [_resolved(v, base) for v in values] if isinstance(values, list) else values)
    benchmarks = (data.get("eval") or {}).get("benchmarks") if isinstance(data.get("eval"), dict) else None
    for benchmark in benchmarks if isinstance(benchmarks, list) else []:
        if isinstance(benchmark, dict) and isinstance(benchmark.get("file"), str):
            benchmark["file"] = _resolved(benchmark["file"], base)
    for dotted in MODEL_FIELDS:
        edit(dotted, lambda value: _resolved(value, base, only_if_exists=True))
    judges = (data.get("roles") or {}).get("judges") if isinstance(data.get("roles"), dict) else None
    for judge in judges if isinstance(judges, list) else []:
        if isinstance(judge, dict) and "model" in judge:
            judge["model"] = _resolved(judge["model"], base, only_if_exists=True)
    return data


def load_config(path: Path, paths_relative_to_file: bool = True) -> PipelineConfig:
    """A pipeline file (or a shipped preset's name); with `paths_relative_to_file`, its relative paths are taken
    from the file's folder, after `$VAR` and `~` are expanded (a shipped preset names the folder sws runs from as
    `$PWD`)."""
    path = pipeline_file(Path(path))
    if not path.exists():
        raise UserError(f"{path}: pipeline file not found, nor a shipped preset ({', '.join(preset_names())})")
    if not path.is_file():
        raise UserError(f"{path}: not a file; pass a pipeline YAML file")
    try:
        text = path.read_text()
    except UnicodeDecodeError:
        raise UserError(f"{path}: not a text file; pass a pipeline YAML file") from None
    data = safe_yaml.load(text, path)
    if data is not None and not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of sections at the top level")
    if data and paths_relative_to_file:
        data = _with_paths_relative_to(data, path.resolve().parent)
    return parse_config(data or {}, path)


def with_overrides(config: PipelineConfig, overrides: dict[str, Any]) -> PipelineConfig:
    """Return a copy with dotted-path overrides (`identify.max_acc`) applied; None values are ignored."""
    data = config.model_dump(mode="json")
    for dotted, value in overrides.items():
        if value is None:
            continue
        node = data
        *parents, leaf = dotted.split(".")
        for key in parents:
            node = node.setdefault(key, {})
        node[leaf] = value
    return parse_config(data, "command-line options")




def load_run_config(
    run_dir: Path, pipeline: Path | None = None, overrides: dict[str, Any] | None = None
) -> PipelineConfig:
    """Config for a command: the pipeline file if given, else the run's config.yaml, else defaults; then overrides."""
    if pipeline is not None:
        config = load_config(pipeline)
    elif RunDir(run_dir).config.exists():
        # The run's own record: its paths were resolved when it was written.
        record = RunDir(run_dir).config
        if record.is_file() and not record.read_bytes().strip():
            raise UserError(f"{record}: empty, so the settings this run was made with are lost; restore it, or "
                            "pass them with --config")
        config = load_config(record, paths_relative_to_file=False)
    else:
        config = PipelineConfig()
    return with_overrides(config, overrides or {})


def save_run_config(run_dir: Path, config: PipelineConfig) -> None:
    write_text(RunDir(run_dir).config, yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
