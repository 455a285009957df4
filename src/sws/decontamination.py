"""Generated problems too close to a benchmark problem (contaminated): found by text in `sws generate`'s
near-duplicate index, and by embedding similarity here, which also catches a paraphrase.

The benchmark problems are those of `synthesize.reference_files` and of the files and shipped sets in
`eval.benchmarks` (a world's own sets, drawn fresh for each run, are not fixed problems to leak). With
`roles.embedder` (all-MiniLM-L6-v2) paraphrases of MATH-500, GSM8K and AIME problems score 0.85-0.98 against
their original and the recorded generations of a real instruct model at most 0.68 against any of them
(tests/test_decontamination.py), so the default threshold is 0.8.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from sws import held_out
from sws.config import PipelineConfig
from sws.embeddings import embed_texts
from sws.errors import UserError
from sws.records import PRESETS, load_preset_benchmark
from sws.tables import read_records

PROBLEM_FIELDS = ("problem", "question")
CLOSEST_PAIRS = 10


def read_reference_problems(path: Path) -> list[str]:
    """Problem texts of a JSON list, JSONL or Parquet file with a `problem` or `question` field."""
    where = "(listed in synthesize.reference_files)"
    if not path.is_file():
        raise UserError(f"{path}: reference file not found {where}; fix the path or remove it")
    table = read_records(path)
    field = next((name for name in PROBLEM_FIELDS if name in table.columns), None)
    if field is None:
        raise UserError(f"{path}: no 'problem' or 'question' field {where}; give a file of problems")
    return [text for text in table[field].cast(pl.Utf8).to_list() if text]


def benchmark_problems(cfg: PipelineConfig) -> list[tuple[str, str]]:
    """`(source, problem)` of every benchmark problem a generated one must not come close to, each text once."""
    found: dict[str, str] = {}
    for reference in cfg.synthesize.reference_files:
        for text in read_reference_problems(Path(reference)):
            found.setdefault(text, reference)
    for entry in held_out.benchmark_entries(cfg):
        if entry.file is not None:
            problems = held_out.read_benchmark_file(entry)
        elif entry.name in PRESETS and entry.name not in held_out.TRAINING_SPLITS:
            problems = load_preset_benchmark(entry.name)
        else:
            continue
        for text in problems["problem"]:
            found.setdefault(text, entry.name)
    return [(source, text) for text, source in found.items()]


@dataclass(frozen=True)
class Nearest:
    """A generated problem's closest benchmark problem and their cosine similarity."""

    source: str
    benchmark_problem: str
    similarity: float


def nearest_benchmarks(problems: list[str], benchmarks: list[tuple[str, str]], cfg: PipelineConfig,
                       run_dir: Path | None) -> list[Nearest]:
    """For each of `problems`, the nearest of `benchmarks` by embedding cosine similarity."""
    if not problems or not benchmarks:
        return []
    embedder = cfg.roles.embedder
    generated = embed_texts(problems, embedder, run_dir)
    reference = embed_texts([text for _, text in benchmarks], embedder, run_dir)
    similarity = generated @ reference.T
    best = similarity.argmax(axis=1)
    return [Nearest(benchmarks[j][0], benchmarks[j][1], float(similarity[i, j])) for i, j in enumerate(best)]


def closest_pairs(problems: list[str], nearest: list[Nearest], count: int = CLOSEST_PAIRS) -> list[dict]:
    """The `count` generated problems nearest to a benchmark problem, nearest first, for the report."""
    order = np.argsort([-match.similarity for match in nearest], kind="stable")[:count]
    return [{"problem": problems[i], "benchmark": nearest[i].source,
             "benchmark_problem": nearest[i].benchmark_problem, "similarity": round(nearest[i].similarity, 4)}
            for i in order]
