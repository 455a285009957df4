"""Held-out sets: the benchmarks `eval.benchmarks` names, and the rule that no held-out problem was trained on.

A benchmark is a shipped set (`math500`, `aime24`, `aime25`, `gsm8k`), a set of the run's world (`arith`), or a
file given as `{name, file, k}` and read as `sws prepare` reads a seed file. The MATH training split is never a
benchmark. A benchmark sharing a problem (same `problem_key`) with the training set of any arm (`sws.arms`) is
refused; sets the world draws itself (arith's fresh problems, `weak_like`) just leave those problems out.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sws.config import BenchmarkConfig, PipelineConfig, PrepareConfig
from sws.errors import UserError
from sws.near_duplicates import problem_key
from sws.records import detect_preset, normalize_records
from sws.tables import read_records

# The MATH training split is a seed set; evaluating on it measures training, not generalisation.
TRAINING_SPLITS = ("math",)
PROBLEM_COLUMNS = ("problem_id", "problem", "answer", "category")


def benchmark_entries(cfg: PipelineConfig) -> list[BenchmarkConfig]:
    """`eval.benchmarks` with plain names as entries of their own (k: eval.k)."""
    entries = [BenchmarkConfig(name=entry) if isinstance(entry, str) else entry for entry in cfg.eval.benchmarks]
    return [entry.model_copy(update={"k": entry.k or cfg.eval.k}) for entry in entries]


def check_settings(cfg: PipelineConfig, source: Path | str) -> None:
    """What needs no run directory: no training split, unique names, and every benchmark file exists."""
    seen: set[str] = set()
    for entry in benchmark_entries(cfg):
        if entry.file is None and entry.name in TRAINING_SPLITS:
            raise UserError(f"{source}: field 'eval.benchmarks' lists '{entry.name}', the MATH training split, which "
                            "is a training set, never a held-out one; use math500 (the test problems) instead")
        if entry.name in seen:
            raise UserError(f"{source}: field 'eval.benchmarks' names '{entry.name}' twice; give each a name of its own")
        seen.add(entry.name)
        if entry.file is not None and not Path(entry.file).is_file():
            raise UserError(f"{source}: field 'eval.benchmarks' entry '{entry.name}' names {entry.file}, which does "
                            "not exist; fix the path (docs/evaluation.md lists where to get each file)")


def read_benchmark_file(entry: BenchmarkConfig) -> pl.DataFrame:
    """A benchmark file normalised as `sws prepare` does (a shipped file's preset guessed from its name)."""
    path = Path(entry.file or "")
    records = read_records(path)
    fields = PrepareConfig(problem_field=entry.problem_field, answer_field=entry.answer_field)
    preset = detect_preset(path, records.columns) if entry.problem_field is None else None
    problems, _ = normalize_records(records, path, fields, preset)
    return problems.select(PROBLEM_COLUMNS)


def training_problems(tables: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """`key, table, problem` of every problem in the training tables given (`sws.arms.training_sets`), by name."""
    frames = [table.select(pl.lit(name).alias("table"), "problem") for name, table in tables.items()]
    if not frames:
        return pl.DataFrame(schema={"key": pl.Utf8, "table": pl.Utf8, "problem": pl.Utf8})
    table = pl.concat(frames)
    return table.with_columns(key=pl.col("problem").map_elements(problem_key, return_dtype=pl.Utf8))


def with_keys(problems: pl.DataFrame) -> pl.DataFrame:
    return problems.with_columns(key=pl.col("problem").map_elements(problem_key, return_dtype=pl.Utf8))


def overlap(problems: pl.DataFrame, training: pl.DataFrame) -> pl.DataFrame:
    """The rows of `problems` whose text (as `problem_key`) is a training problem's."""
    return with_keys(problems).filter(pl.col("key").is_in(training["key"].implode())).drop("key")


def without_training(problems: pl.DataFrame, training: pl.DataFrame) -> pl.DataFrame:
    """`problems` less every one a checkpoint trains on."""
    return with_keys(problems).filter(~pl.col("key").is_in(training["key"].implode())).drop("key")


def refuse_overlap(name: str, problems: pl.DataFrame, training: pl.DataFrame, source: Path | str) -> None:
    """UserError naming the benchmark, how many of its problems the training tables hold, and where."""
    shared = with_keys(problems).join(training.unique("key").select("key", "table"), on="key")
    if shared.height == 0:
        return
    tables = ", ".join(f"{count} in {table}" for table, count in
                       shared.group_by("table").len().sort("table").iter_rows())
    example = shared["problem"][0]
    raise UserError(f"{source}: benchmark '{name}' shares {shared.height} of its {problems.height} problems with "
                    f"the run's training sets ({tables}), e.g. {example[:70]!r}; a held-out set must hold no "
                    "training problem: remove them from the benchmark file or drop it from eval.benchmarks")
