"""Embedding decontamination against paraphrases written for this test and against a real model's generations."""

import json
from pathlib import Path

from sws.config import PipelineConfig
from sws.decontamination import benchmark_problems, nearest_benchmarks
from sws.parsing import parse_problem

DATA = Path(__file__).parents[1] / "src" / "sws" / "data"
FIXTURES = Path(__file__).parent / "fixtures"
THRESHOLD = PipelineConfig().synthesize.contamination_similarity


def benchmark_pool(originals: list[str]) -> list[tuple[str, str]]:
    """The paraphrased originals among a slice of each shipped benchmark (the whole of them takes minutes to
    embed on a small CPU)."""
    math500 = [row["problem"] for row in json.loads((DATA / "math500.json").read_text())[:40]]
    aime24 = [row["problem"] for row in json.loads((DATA / "aime24.json").read_text())]
    lines = (DATA / "gsm8k_test.jsonl").read_text().splitlines()[:20]
    gsm8k = [json.loads(line)["question"] for line in lines]
    texts = dict.fromkeys([*originals, *math500, *aime24, *gsm8k])
    return [("benchmark", text) for text in texts]


def test_paraphrased_benchmark_problems_are_caught_and_real_generations_are_not(tmp_path):
    pairs = [json.loads(line) for line in (FIXTURES / "benchmark_paraphrases.jsonl").read_text().splitlines()]
    pool = benchmark_pool([pair["original"] for pair in pairs])
    recorded = [json.loads(line) for line in
                (FIXTURES / "teacher_outputs" / "qwen2.5-coder-1.5b-instruct.jsonl").read_text().splitlines()]
    generated = [problem for row in recorded if row["role"] == "generator"
                 if (problem := parse_problem(row["output"])) is not None]
    cfg = PipelineConfig()

    paraphrases = nearest_benchmarks([pair["paraphrase"] for pair in pairs], pool, cfg, tmp_path)
    clean = nearest_benchmarks(generated, pool, cfg, tmp_path)

    caught = [match for match in paraphrases if match.similarity >= THRESHOLD]
    assert len(pairs) == 10 and len(caught) >= 9
    assert all(match.benchmark_problem == pair["original"] for match, pair in zip(paraphrases, pairs, strict=True))
    assert len(generated) >= 15 and max(match.similarity for match in clean) < THRESHOLD


def test_benchmark_problems_come_from_reference_files_and_eval_benchmarks(tmp_path):
    extra = tmp_path / "extra.jsonl"
    extra.write_text(json.dumps({"problem": "What is 6 times 7?", "answer": "42"}) + "\n")
    cfg = PipelineConfig.model_validate({"world": "math", "synthesize": {"reference_files": [str(DATA / "aime24.json")]},
                                         "eval": {"benchmarks": ["aime24", "aime25", {"name": "extra",
                                                                                        "file": str(extra)}]}})
    sources = [source for source, _ in benchmark_problems(cfg)]
    assert sources.count(str(DATA / "aime24.json")) == 30  # aime24 twice: once
    assert sources.count("aime25") == 30 and sources.count("extra") == 1 and len(sources) == 61
    assert benchmark_problems(PipelineConfig()) == []  # the demo's world set is drawn fresh: nothing to leak
