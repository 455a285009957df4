"""Pipeline configuration: pydantic models of a pipeline YAML, with CLI overrides.

A run directory keeps its resolved configuration in `config.yaml`; commands load it (or the defaults), apply the
options given on the command line, and write it back, so every stage of a run sees the same settings.
Unknown keys are errors that name the key.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

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

    n_seed_problems: int = 600
    n_eval_per_category: int = 50
    bootstrap_steps: int = 1500
    oracle_noise: dict[str, float] = Field(default_factory=dict)


class PrepareConfig(Section):
    input: str | None = None
    preset: str | None = None
    problem_field: str | None = None
    answer_field: str | None = None
    category_field: str | None = None
    id_field: str | None = None
    categories: list[str] | None = None


class IdentifyConfig(Section):
    max_acc: float = 0.5
    max_slope: float = 0.0
    strict: bool = False
    min_records: int = 1


class SynthesizeConfig(Section):
    budget: int = 200
    concepts_per_problem: int = 5
    set_size: int = 5
    temperature: float = 0.2
    cooc_weight: float = 1.0
    sim_weight: float = 1.0
    levels: list[str] = Field(default_factory=lambda: ["easy", "medium", "hard"])
    min_problem_chars: int = 10
    max_problem_tokens: int = 400
    near_duplicate_threshold: float = 0.9
    ratings_per_judge: int = 1
    min_perfect_ratio: float = 0.5
    allow_bad: bool = False
    label_samples: int = 8
    min_consistency: float = 0.5
    weak_to_strong: bool = False
    student_samples: int = 8
    student_min_agreement: float = 0.25
    shard_size: int = 256


class FilterConfig(Section):
    band: tuple[float, float] = (0.25, 0.75)
    rollouts: int = 8
    max_tokens: int = 32


class TrainConfig(Section):
    trainer: Literal["trl", "verl"] = "trl"
    initial_steps: int = 200
    augmented_steps: int = 200
    batch_size: int = 16
    num_generations: int = 8
    learning_rate: float = 5e-4
    max_completion_length: int = 24
    temperature: float = 1.0
    beta: float = 0.0
    save_steps: int = 50
    use_vllm: bool = False
    extra: dict[str, Any] = Field(default_factory=dict)


class EvalConfig(Section):
    benchmarks: list[str] = Field(default_factory=lambda: ["arith"])
    k: int = 8
    temperature: float = 1.0
    max_tokens: int = 32


class PipelineConfig(Section):
    seed: int = 0
    world: Literal["arith", "math"] = "arith"
    arith: ArithConfig = Field(default_factory=ArithConfig)
    roles: RolesConfig = Field(default_factory=RolesConfig)
    prepare: PrepareConfig = Field(default_factory=PrepareConfig)
    identify: IdentifyConfig = Field(default_factory=IdentifyConfig)
    synthesize: SynthesizeConfig = Field(default_factory=SynthesizeConfig)
    filter: FilterConfig = Field(default_factory=FilterConfig)
    train: TrainConfig = Field(default_factory=TrainConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)


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
