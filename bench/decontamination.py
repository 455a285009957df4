"""Embedding decontamination on every shipped benchmark problem: recall on paraphrases, false rejections on real
generations.

Embeds the 1,879 problems of MATH-500, AIME 2024/2025 and GSM8K (minutes on a small CPU; the unit test uses a
slice), then prints, at `synthesize.contamination_similarity`, how many of the ten paraphrases of
tests/fixtures/benchmark_paraphrases.jsonl are caught (and whether their nearest benchmark problem is their
original), and how many problems a real instruct model generated (tests/fixtures/teacher_outputs) would be
rejected, with the highest similarities of each.
Run: PYTHONPATH=src python bench/decontamination.py
"""

from __future__ import annotations

import json
from pathlib import Path

from sws.config import PipelineConfig
from sws.decontamination import benchmark_problems, nearest_benchmarks
from sws.parsing import parse_problem
from sws.records import DATA_DIR

FIXTURES = Path(__file__).parents[1] / "tests" / "fixtures"


def main() -> None:
    cfg = PipelineConfig.model_validate({"world": "math", "eval": {"benchmarks": ["math500", "aime24", "aime25",
                                                                                  "gsm8k"]}})
    threshold = cfg.synthesize.contamination_similarity
    pool = benchmark_problems(cfg)
    pairs = [json.loads(line) for line in (FIXTURES / "benchmark_paraphrases.jsonl").read_text().splitlines()]
    recorded = [json.loads(line) for line in
                (FIXTURES / "teacher_outputs" / "qwen2.5-coder-1.5b-instruct.jsonl").read_text().splitlines()]
    generated = [problem for row in recorded if row["role"] == "generator"
                 if (problem := parse_problem(row["output"])) is not None]
    paraphrases = nearest_benchmarks([pair["paraphrase"] for pair in pairs], pool, cfg, None)
    clean = nearest_benchmarks(generated, pool, cfg, None)
    own = sum(match.benchmark_problem == pair["original"] for match, pair in zip(paraphrases, pairs, strict=True))
    print(f"benchmark problems: {len(pool)} (from {DATA_DIR}); threshold {threshold}")
    print(f"paraphrases caught: {sum(m.similarity >= threshold for m in paraphrases)} of {len(pairs)}; nearest is "
          f"the original for {own}; similarities {sorted(round(m.similarity, 3) for m in paraphrases)}")
    print(f"real generations rejected: {sum(m.similarity >= threshold for m in clean)} of {len(clean)}; highest "
          f"{sorted((round(m.similarity, 3) for m in clean), reverse=True)[:5]}")


if __name__ == "__main__":
    main()
