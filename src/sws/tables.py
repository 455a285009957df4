"""The run directory's tables: declared Parquet schemas, their paths, and reading and writing them checked.

A missing or mistyped column is caught at the boundary with one line that names the file, the column and what was
expected; a missing table names the command that makes it.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from sws import arms
from sws.atomic_files import write_parquet
from sws.cotrain.arms import COTRAIN_ARMS, INITIAL_VALIDATION
from sws.errors import UserError
from sws.run_dir import LATER_ROUNDS, UNTARGETED, RunDir
from sws.stage import producer_of

STR = pl.Utf8

INT = pl.Int64

FLOAT = pl.Float64

BOOL = pl.Boolean

STR_LIST = pl.List(pl.Utf8)

FLOAT_LIST = pl.List(pl.Float64)

ROLLOUT_COLUMNS: dict[str, pl.DataType] = {"step": INT, "problem_id": STR, "n": INT, "n_correct": INT}

EVAL_PROBLEMS: dict[str, pl.DataType] = {
    "checkpoint": STR, "eval_set": STR, "problem_id": STR, "category": STR,
    "greedy_correct": BOOL, "n": INT, "n_correct": INT, "k": INT, "problem": STR,
}

COTRAIN_POOL: dict[str, pl.DataType] = {
    "step": INT, "slot": INT, "task_id": INT, "context_hash": STR, "problem": STR, "answer": STR,
    "synth_answer": STR, "solution": STR, "solution_answer": STR, "category": STR, "valid": BOOL,
    "reject_reason": STR, "quality": FLOAT, "quality_reason": STR, "reliability": FLOAT, "k": INT, "n_correct": INT,
    "sr": FLOAT, "teachability": FLOAT, "reward": FLOAT,
}

COTRAIN_METRICS: dict[str, pl.DataType] = {
    "step": INT, "generated": INT, "valid": INT, "acceptance": FLOAT, "productive": INT, "productive_rate": FLOAT,
    "productive_of_valid": FLOAT, "sr_zero": INT, "never_solved_of_valid": FLOAT, "sr_one": INT,
    "duplicates": INT, "duplicates_of_valid": FLOAT, "sr_histogram": pl.List(INT),
    "synth_reward_mean": FLOAT, "synth_reward_std": FLOAT, "distinct_problems": FLOAT, "category_entropy": FLOAT,
    "synth_label_error": FLOAT, "seconds_generate": FLOAT, "seconds_verify": FLOAT, "seconds_solve": FLOAT,
    "seconds_update": FLOAT, "tokens_generate": INT, "tokens_solve": INT, "tokens_update": INT,
    "reasoner_rollouts": INT, "replayed_tasks": INT, "seed_set_tasks": INT,
}

COTRAIN_VALIDATION: dict[str, pl.DataType] = {
    "task_id": INT, "problem": STR, "answer": STR, "category": STR, "k": INT, "n_correct": INT, "accuracy": FLOAT,
}

# Key columns of each artifact (DESIGN §3). Artifacts may carry more columns; these must be present and typed.
SCHEMAS: dict[str, dict[str, pl.DataType]] = {
    "problems": {"problem_id": STR, "problem": STR, "answer": STR, "category": STR, "source": STR},
    "rollouts": ROLLOUT_COLUMNS,
    "weakness": {
        "problem_id": STR, "category": STR, "accs": FLOAT_LIST, "n_record": INT,
        "max_acc": FLOAT, "slope": FLOAT, "weak": BOOL,
    },
    "categories": {"category": STR, "n_problems": INT, "n_weak": INT, "fail_ratio": FLOAT, "share": FLOAT},
    "concepts": {"problem_id": STR, "category": STR, "concepts": STR_LIST},
    "concept_sets": {"set_id": STR, "category": STR, "concepts": STR_LIST, "level": STR, "instance": INT},
    "synthetic": {"syn_id": STR, "category": STR, "concepts": STR_LIST, "level": STR, "problem": STR},
    "rated": {"syn_id": STR, "category": STR, "concepts": STR_LIST, "level": STR, "problem": STR, "verdicts": STR},
    "labeled": {
        "syn_id": STR, "category": STR, "concepts": STR_LIST, "level": STR, "problem": STR,
        "answer": STR, "consistency": FLOAT,
    },
    # The labeled problems the audit kept (sws.stages.audit), with its answers.
    "audited": {
        "syn_id": STR, "category": STR, "concepts": STR_LIST, "level": STR, "problem": STR,
        "answer": STR, "consistency": FLOAT, "audited": BOOL,
    },
    "scored": {
        "syn_id": STR, "category": STR, "concepts": STR_LIST, "level": STR, "problem": STR, "answer": STR,
        "n": INT, "n_correct": INT, "accuracy": FLOAT,
    },
    "filtered": {
        "syn_id": STR, "category": STR, "problem": STR, "answer": STR,
        "n": INT, "n_correct": INT, "accuracy": FLOAT, "round": INT,
    },
    "selected": {"problem_id": STR, "problem": STR, "answer": STR, "category": STR, "source": STR,
                 "distance": FLOAT, "nearest_weak_id": STR},
    "augmented": {"problem_id": STR, "problem": STR, "answer": STR, "category": STR, "source": STR},
    # The selected arm's training set (`select.arm`): seed ∪ selected, mixed as augmented is.
    "selected_mix": {"problem_id": STR, "problem": STR, "answer": STR, "category": STR, "source": STR},
    # The random-selection control (`select.random_arm`): pool problems drawn at random, and seed ∪ them.
    "random_selected": {"problem_id": STR, "problem": STR, "answer": STR, "category": STR, "source": STR,
                        "distance": FLOAT, "nearest_weak_id": STR},
    "random_selected_mix": {"problem_id": STR, "problem": STR, "answer": STR, "category": STR, "source": STR},
    # The upper-bound arms (`oracle_family.arm`): seed ∪ fresh problems of the weak problems' own families.
    **{name: {"problem_id": STR, "problem": STR, "answer": STR, "category": STR, "source": STR}
       for name in ("oracle_family_mix", "oracle_family_large_mix")},
    # Each arm's curve and rollout log (the initial arm's is `rollouts`, what identify reads).
    **{arm.curve: {"step": INT, "reward": FLOAT, "reward_std": FLOAT, "loss": FLOAT} for arm in arms.ARMS},
    **{arm.rollouts: ROLLOUT_COLUMNS for arm in arms.ARMS},
    # What `sws eval` samples every checkpoint on (held-out sets, the weak problems, the seed set), then per
    # checkpoint its answers (`eval/parts/<checkpoint>`) and all of them together.
    "eval/sets": {"eval_set": STR, "problem_id": STR, "problem": STR, "answer": STR, "category": STR, "k": INT,
                  "benchmark": BOOL, "held_out": BOOL},
    **{f"eval/parts/{checkpoint}": EVAL_PROBLEMS for checkpoint in arms.CHECKPOINTS},
    "eval/problems": EVAL_PROBLEMS,
    "eval/benchmarks": {
        "checkpoint": STR, "eval_set": STR, "category": STR, "n": INT, "pass1": FLOAT, "avg_k": FLOAT,
    },
    "eval/weakness": {"checkpoint": STR, "category": STR, "n_weak": INT, "n_solved": INT, "solved": FLOAT,
                      "avg_k": FLOAT},
    # `sws run --rounds N` (sws.stages.rounds).
    "prior_weak": {"problem_id": STR},
    "ledger": {"round": INT, "problem_id": STR, "weak": BOOL, "max_acc": FLOAT, "slope": FLOAT, "accuracy": FLOAT,
               "status": STR},
    "rounds_summary": {"round": INT, "n_weak": INT, "n_kept": INT},
    "reference_rated": {"syn_id": STR, "verdicts": STR},
    # Co-training (`sws.cotrain`): every candidate task, the metrics per step, the held-out answers, per arm.
    **{arm.pool: COTRAIN_POOL for arm in COTRAIN_ARMS},
    **{arm.metrics: COTRAIN_METRICS for arm in COTRAIN_ARMS},
    **{arm.validation: COTRAIN_VALIDATION for arm in COTRAIN_ARMS},
    INITIAL_VALIDATION: COTRAIN_VALIDATION,
}

# Difficulty-adaptive regeneration (`sws filter` with synthesize.adapt_rounds): round r >= 1 writes its own
# concept_sets, synthetic, rated, labeled and scored tables, and manifests of its steps, under adapt/round-<r>/.
ADAPT_DIR = "adapt"

ROUND_PREFIX = re.compile(rf"^{ADAPT_DIR}/round-\d+/")

# A later round of `sws run --rounds N` is a run folder of its own, `rounds/<r>/`; from the run, its tables are
# named `rounds/<r>/<table>` (`sws.run_dir.in_round`).
LATER_ROUND_PREFIX = re.compile(rf"^{LATER_ROUNDS}/\d+/")

# The untargeted control's folder holds the tables of a run (`untargeted/augmented`, say).
UNTARGETED_PREFIX = re.compile(rf"^{UNTARGETED}/")


def round_name(name: str, adapt_round: int) -> str:
    """The table or stage `name` of adaptive round `adapt_round` (round 0 is the original synthesis)."""
    return name if adapt_round == 0 else f"{ADAPT_DIR}/round-{adapt_round}/{name}"


def artifact_kind(name: str) -> str:
    """The artifact a (possibly per-round) table name holds: adapt/round-2/labeled -> labeled,
    rounds/2/weakness -> weakness."""
    return ROUND_PREFIX.sub("", LATER_ROUND_PREFIX.sub("", UNTARGETED_PREFIX.sub("", name)))


def table_path(run_dir: Path, name: str) -> Path:
    return RunDir(run_dir).table(name)


def rejected_path(run_dir: Path, name: str) -> Path:
    return RunDir(run_dir).rejected(name)


def check_schema(df: pl.DataFrame, name: str, source: Path | str) -> None:
    """Raise UserError on the first missing or mistyped key column of artifact `name`."""
    for column, dtype in SCHEMAS[artifact_kind(name)].items():
        if column not in df.columns:
            raise UserError(f"{source}: missing column '{column}' (expected {dtype} in a '{name}' table)")
        if df.schema[column] != dtype and not (df.height == 0 and df.schema[column] == pl.Null):
            raise UserError(f"{source}: column '{column}' has type {df.schema[column]}, expected {dtype}")


def empty_table(name: str, extra: dict[str, pl.DataType] | None = None) -> pl.DataFrame:
    return pl.DataFrame(schema={**SCHEMAS[artifact_kind(name)], **(extra or {})})


def write_table(run_dir: Path, name: str, df: pl.DataFrame) -> Path:
    """Validate and atomically write artifact `name` into the run directory."""
    path = table_path(run_dir, name)
    check_schema(df, name, path)
    write_parquet(df, path)
    return path


def write_rejected(run_dir: Path, name: str, df: pl.DataFrame) -> Path:
    """Write the rows a filtering stage dropped, each with its `reject_reason`."""
    if "reject_reason" not in df.columns:
        raise ValueError("rejected rows need a reject_reason column")
    path = rejected_path(run_dir, name)
    write_parquet(df, path)
    return path


def read_parquet(path: Path) -> pl.DataFrame:
    path = Path(path)
    if not path.exists():
        raise UserError(f"{path}: file not found")
    try:
        return pl.read_parquet(path)
    except Exception as exc:  # polars raises several types for corrupt files
        raise UserError(f"{path}: not a readable Parquet file ({type(exc).__name__}); rewrite it") from exc


def read_records(path: Path) -> pl.DataFrame:
    """A JSON list, JSONL or Parquet file as a table; a missing or unreadable file is a UserError."""
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    if path.suffix == ".parquet":
        return read_parquet(path)
    try:
        if path.suffix == ".jsonl":
            return pl.read_ndjson(path, infer_schema_length=None)
        return pl.read_json(path, infer_schema_length=None)
    except Exception as exc:  # polars raises several types for malformed JSON
        raise UserError(f"{path}: not a readable {path.suffix or 'JSON'} file ({type(exc).__name__}); fix or "
                        "re-export it (a JSON list of objects, JSONL or Parquet)") from exc


def read_table(run_dir: Path, name: str) -> pl.DataFrame:
    """Read and validate artifact `name`; a missing or damaged file names the command that makes it."""
    path = table_path(run_dir, name)
    if not path.exists():
        raise UserError(f"{path}: not found; run `{_producer(name)} --run {run_dir}` first")
    try:
        df = pl.read_parquet(path)
        check_schema(df, name, path)
    except UserError as exc:
        raise UserError(f"{exc}; {_rebuild(name, run_dir)}") from None
    except Exception as exc:  # polars raises several types for corrupt files
        raise UserError(f"{path}: not a readable Parquet file ({type(exc).__name__}); "
                        f"{_rebuild(name, run_dir)}") from None
    return df


def _producer(name: str) -> str:
    return ("sws filter" if ROUND_PREFIX.match(name) else "sws run PIPELINE --rounds N"
            if LATER_ROUND_PREFIX.match(name) else "sws untargeted" if UNTARGETED_PREFIX.match(name)
            else producer_of(name))


def _rebuild(name: str, run_dir: Path) -> str:
    """The fix for a damaged table: a table sws wrote is written again by the command that makes it."""
    try:
        return f"delete it and rerun `{_producer(name)} --run {run_dir}`, which writes it again"
    except KeyError:  # a table no stage of this run writes (a later round's inputs): rewritten where it came from
        return "rewrite it"
