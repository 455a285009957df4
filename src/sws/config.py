"""Pipeline configuration: pydantic models of a pipeline YAML, with CLI overrides.

A run directory keeps its resolved configuration in `config.yaml`; commands load it (or the defaults), apply the
options given on the command line, and write it back, so every stage of a run sees the same settings.
Unknown keys are errors that name the key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from sws.artifacts import write_text
from sws.errors import UserError


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class EngineConfig(Section):
    """One role's model: which engine runs it, which model, engine options and default sampling."""

    engine: str = "oracle"
    model: str = "arith-oracle"
    options: dict[str, Any] = Field(default_factory=dict)
    temperature: float = 0.7
    top_p: float = 1.0
    max_tokens: int = 1024


class EmbedderConfig(Section):
    model: str = "all-MiniLM-L6-v2"
    batch_size: int = 256


class RolesConfig(Section):
    extractor: EngineConfig = Field(default_factory=EngineConfig)
    generator: EngineConfig = Field(default_factory=EngineConfig)
    judges: list[EngineConfig] = Field(default_factory=lambda: [EngineConfig()])
    labeler: EngineConfig = Field(default_factory=EngineConfig)
    # An empty model means the run's initial checkpoint (train/initial/final).
    policy: EngineConfig = Field(default_factory=lambda: EngineConfig(engine="hf", model="", temperature=1.0))
    embedder: EmbedderConfig = Field(default_factory=EmbedderConfig)


class ArithConfig(Section):
    """The built-in arithmetic world (DESIGN §6)."""

    n_seed_problems: int = Field(600, ge=1)
    # Levels of the seed set the pipeline draws (the held-out evaluation always covers all three).
    seed_levels: list[str] = Field(default_factory=lambda: ["easy", "medium", "hard"], min_length=1)
    n_eval_per_category: int = Field(50, ge=1)
    # Supervised warm-start steps of the tiny policy (batch 32; about 3 minutes on one idle core).
    bootstrap_steps: int = Field(1200, ge=1)


class PrepareConfig(Section):
    input: str | None = None
    preset: str | None = None
    problem_field: str | None = None
    answer_field: str | None = None
    category_field: str | None = None
    id_field: str | None = None
    categories: list[str] | None = None


class IngestConfig(Section):
    """`sws ingest`: another trainer's rollout log (`format` + `path`) read into rollouts.parquet."""

    format: Literal["verl", "acc_records"] | None = None
    # verl: the trainer.rollout_data_dir folder; acc_records: the acc_records.json file.
    path: str | None = None
    # The file the trainer read, when its `index` is not the row position in problems.parquet.
    seed_file: str | None = None


class IdentifyConfig(Section):
    """`sws identify`: weak <=> n_record >= min_records, max_acc <= max_acc and slope <= max_slope (< if strict)."""

    max_acc: float = 0.5
    max_slope: float = 0.0
    strict: bool = False
    min_records: int = Field(1, ge=0)


class SynthesizeConfig(Section):
    """`sws synthesize`: extract, combine, generate, rate, label (DESIGN §1 stage 3)."""

    budget: int = Field(200, ge=0)
    concepts_per_problem: int = Field(5, ge=1)
    set_size: int = Field(5, ge=1)
    temperature: float = Field(0.2, gt=0)
    cooc_weight: float = 1.0
    sim_weight: float = 1.0
    levels: list[str] = Field(default_factory=lambda: ["easy", "medium", "hard"], min_length=1)
    # Problems per distinct concept set when a category's concepts cannot supply its quota of distinct sets
    # (a small concept vocabulary, like the arith world's); 1 keeps the paper's one problem per set.
    max_problems_per_set: int = Field(1, ge=1)
    min_problem_chars: int = 10
    max_problem_tokens: int = 400
    near_duplicate_threshold: float = Field(0.9, ge=0, le=1)
    # Shorter problems (normalised) are duplicates only when equal; see sws.near_duplicates.
    near_duplicate_min_chars: int = 40
    # JSON / JSONL / Parquet files with a `problem` (or `question`) field, e.g. benchmark test sets; generated
    # problems too close to one of them (or to the seed set) are rejected.
    reference_files: list[str] = Field(default_factory=list)
    # Folder of replacement prompt templates (extract.md, generate.md, rate.md, label.md); None: the shipped ones.
    prompt_dir: str | None = None
    ratings_per_judge: int = Field(1, ge=1)
    # A judgement without a verdict below an analysis, or cut off, is asked again (new seed) up to this many times.
    rate_retries: int = Field(2, ge=0)
    min_perfect_ratio: float = 0.5
    allow_bad: bool = False
    label_samples: int = Field(8, ge=1)
    min_consistency: float = 0.5
    weak_to_strong: bool = False
    student_samples: int = Field(8, ge=1)
    student_min_agreement: float = 0.25
    shard_size: int = Field(256, ge=1)


class FilterConfig(Section):
    """`sws filter`: keep labeled problems whose accuracy under the initial policy lies in `band` (inclusive)."""

    band: tuple[float, float] = (0.25, 0.75)
    rollouts: int = Field(8, ge=1)
    max_tokens: int = Field(32, ge=1)
    # Problems per shard: a crash loses at most one shard's grading (the request cache keeps its samples).
    shard_size: int = Field(256, ge=1)

    @field_validator("band")
    @classmethod
    def _band_is_an_interval(cls, band: tuple[float, float]) -> tuple[float, float]:
        if not 0.0 <= band[0] <= band[1] <= 1.0:
            raise ValueError(f"need 0 <= low <= high <= 1, got {list(band)}; give two accuracies like [0.25, 0.75]")
        return band


class TrainConfig(Section):
    """`sws train`: GRPO (TRL) settings; `extra` passes further `trl.GRPOConfig` fields through unchanged."""

    trainer: Literal["trl", "verl"] = "trl"
    # Outside the arith world: the model `sws train initial` starts from (HF id or folder).
    init_model: str = ""
    initial_steps: int = Field(200, ge=1)
    augmented_steps: int = Field(200, ge=1)
    # None: as many as augmented_steps, the comparison the paper makes.
    baseline_steps: int | None = Field(None, ge=1)
    # Problems per step; each is rolled out num_generations times.
    batch_size: int = Field(8, ge=1)
    num_generations: int = Field(8, ge=2)
    # Constant (no decay). On the arith tiny policy 1e-4 raises greedy accuracy; 5e-4 lowers it.
    learning_rate: float = Field(1e-4, gt=0)
    max_completion_length: int = Field(24, ge=1)
    temperature: float = Field(1.0, gt=0)
    beta: float = Field(0.0, ge=0)
    save_steps: int = Field(50, ge=1)
    use_vllm: bool = False
    # Train augmented and baseline at once, one process each. None: yes on a CPU with a core per run.
    side_by_side: bool | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class EvalConfig(Section):
    """`sws eval`: held-out sets (arith, math500, aime24, aime25, gsm8k), the weak problems and the seed set."""

    benchmarks: list[str] = Field(default_factory=lambda: ["arith"])
    checkpoints: list[Literal["start", "initial", "baseline", "augmented"]] = Field(
        default_factory=lambda: ["start", "initial", "baseline", "augmented"]
    )
    # The seed set under every checkpoint gives each training set's teachability in the report.
    seed_set: bool = True
    k: int = Field(8, ge=1)
    temperature: float = Field(1.0, gt=0)
    max_tokens: int = Field(32, ge=1)
    # Requests per shard: a crash loses at most one shard (the request cache keeps the rest).
    shard_size: int = Field(1024, ge=1)


class ReportConfig(Section):
    """`sws report`: how much of each plot to draw."""

    max_trajectories: int = Field(60, ge=0)


class PipelineConfig(Section):
    seed: int = 0
    world: Literal["arith", "math"] = "arith"
    arith: ArithConfig = Field(default_factory=ArithConfig)
    roles: RolesConfig = Field(default_factory=RolesConfig)
    prepare: PrepareConfig = Field(default_factory=PrepareConfig)
    ingest: IngestConfig = Field(default_factory=IngestConfig)
    identify: IdentifyConfig = Field(default_factory=IdentifyConfig)
    synthesize: SynthesizeConfig = Field(default_factory=SynthesizeConfig)
    filter: FilterConfig = Field(default_factory=FilterConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    report: ReportConfig = Field(default_factory=ReportConfig)


def _first_error(exc: ValidationError, source: Path | str) -> UserError:
    error = exc.errors()[0]
    where = ".".join(str(part) for part in error["loc"]) or "(top level)"
    if error["type"] == "extra_forbidden":
        return UserError(f"{source}: unknown key '{where}'; remove it or check its spelling")
    return UserError(f"{source}: field '{where}': {error['msg']}")


def parse_config(data: dict[str, Any], source: Path | str) -> PipelineConfig:
    try:
        return PipelineConfig.model_validate(data or {})
    except ValidationError as exc:
        raise _first_error(exc, source) from None


def load_config(path: Path) -> PipelineConfig:
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: pipeline file not found")
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    if data is not None and not isinstance(data, dict):
        raise UserError(f"{path}: expected a mapping of sections at the top level")
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


def run_config_path(run_dir: Path) -> Path:
    return Path(run_dir) / "config.yaml"


def load_run_config(
    run_dir: Path, pipeline: Path | None = None, overrides: dict[str, Any] | None = None
) -> PipelineConfig:
    """Config for a command: the pipeline file if given, else the run's config.yaml, else defaults; then overrides."""
    if pipeline is not None:
        config = load_config(pipeline)
    elif run_config_path(run_dir).exists():
        config = load_config(run_config_path(run_dir))
    else:
        config = PipelineConfig()
    return with_overrides(config, overrides or {})


def save_run_config(run_dir: Path, config: PipelineConfig) -> None:
    write_text(run_config_path(run_dir), yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
