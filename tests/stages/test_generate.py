from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from _synthesis_run import (
    ScriptedEngine,
    noisy_oracle_config,
    scripted_role,
    use_engines,
    write_identified_run,
)

from sws import runner
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.prompts import load_template
from sws.records import DATA_DIR
from sws.stages import generate
from sws.tables import read_parquet, read_table, rejected_path, table_path, write_table
from sws.worlds.arith import solve

PREFILTERED_KINDS = {"multi_part", "multiple_choice", "proof", "true_false", "answer_leak"}


def write_sets(run_dir: Path, n: int, category: str = "multiplication") -> None:
    concepts = [["multiplication", "place value"], ["multi-digit multiplication", "two-digit numbers"]]
    write_table(run_dir, "concept_sets", pl.DataFrame({
        "set_id": [f"set-{index:04d}" for index in range(n)], "category": [category] * n,
        "concepts": [concepts[index % 2] for index in range(n)],
        "level": [("easy", "medium", "hard")[index % 3] for index in range(n)], "instance": [0] * n,
    }))


def scripted_generator(monkeypatch, problems: list[str | None]) -> ScriptedEngine:
    """A generator that writes problems[i] (None: an output without the problem marker) for the i-th set."""

    def respond(request, _):
        problem = problems[len(engine.requests) - 1]
        return "Let me think.\n" + ("I could not come up with one." if problem is None else f"### Problem\n{problem}\n")

    engine = ScriptedEngine(respond)
    use_engines(monkeypatch, {"scripted": engine})
    return engine


def config_with_scripted_generator(**synthesize: object) -> PipelineConfig:
    config = PipelineConfig()
    config.roles.generator = scripted_role("scripted")
    config.synthesize.shard_size = 1  # one request per call, so the scripted engine answers them in order
    for name, value in synthesize.items():
        setattr(config.synthesize, name, value)
    return config


def test_noisy_oracle_problems_are_prefiltered_by_kind(tmp_path: Path) -> None:
    write_identified_run(tmp_path)
    write_sets(tmp_path, 120)
    result = runner.run(generate.STAGE, noisy_oracle_config(), tmp_path)
    kept = read_table(tmp_path, "synthetic")
    rejected = read_parquet(rejected_path(tmp_path, "synthetic"))
    assert kept.height + rejected.height == 120
    assert result.info["funnel"]["kept"] == kept.height
    for problem in kept["problem"]:
        assert solve(problem).kind not in PREFILTERED_KINDS
    defects = rejected.filter(pl.col("reject_reason").is_in(list(PREFILTERED_KINDS)))
    assert defects.height > 0
    for problem, reason in zip(defects["problem"], defects["reject_reason"], strict=True):
        assert solve(problem).kind == reason
    duplicates = rejected.filter(pl.col("reject_reason") == "near_duplicate")
    assert all(detail.startswith(("seed:", "batch:")) for detail in duplicates["reject_detail"])
    assert rejected["reject_reason"].null_count() == 0


def test_syn_ids_are_stable_across_reruns(tmp_path: Path) -> None:
    write_identified_run(tmp_path)
    write_sets(tmp_path, 20)
    runner.run(generate.STAGE, noisy_oracle_config(), tmp_path)
    first = read_table(tmp_path, "synthetic")
    runner.run(generate.STAGE, noisy_oracle_config(), tmp_path, force=True)
    again = read_table(tmp_path, "synthetic")
    assert again["syn_id"].to_list() == first["syn_id"].to_list()
    assert again["problem"].to_list() == first["problem"].to_list()
    assert first["syn_id"].n_unique() == first.height


def test_near_duplicates_of_seed_batch_and_reference_problems(tmp_path: Path, monkeypatch) -> None:
    problems = write_identified_run(tmp_path)
    seed_problem = problems["problem"][0]
    long_problem = ("A library lends 125 books on Monday and 98 books on Tuesday. On Wednesday it lends twice as "
                    "many books as on Monday. How many books does it lend in the three days?")
    reference = tmp_path / "bench.jsonl"
    reference.write_text(json.dumps({"problem": long_problem, "answer": "473"}) + "\n")
    write_sets(tmp_path, 5)
    scripted_generator(monkeypatch, [
        seed_problem.lower(),  # the seed set, respelled
        "Compute 4321*9.",  # new
        "compute 4321 * 9",  # the previous one again
        long_problem.replace("Monday and", "Monday, and").upper(),  # a respelled benchmark problem
        "Compute 4321*8.",  # one digit away from a kept problem: a different problem
    ])
    config = config_with_scripted_generator(reference_files=[str(reference)])
    runner.run(generate.STAGE, config, tmp_path)
    kept = read_table(tmp_path, "synthetic")
    rejected = read_parquet(rejected_path(tmp_path, "synthetic"))
    assert kept["problem"].to_list() == ["Compute 4321*9.", "Compute 4321*8."]
    # A respelled benchmark problem is contaminated, not just a duplicate.
    assert rejected["reject_reason"].to_list() == ["near_duplicate", "near_duplicate", "contaminated"]
    seed_id = problems["problem_id"][0]
    batch_id = kept["syn_id"][0]
    assert rejected["reject_detail"].to_list() == [f"seed:{seed_id}", f"batch:{batch_id}", f"reference:{reference}"]


def test_a_generator_that_declines_the_request_is_rejected_as_refused_not_unparsed(tmp_path: Path,
                                                                                    monkeypatch) -> None:
    write_identified_run(tmp_path)
    write_sets(tmp_path, 2)
    replies = iter(["I need a problem on: a, b.\nI cannot build such a problem: no addition problem shows both.\n",
                    "I'm sorry, but I can't write a problem that combines those concepts."])
    use_engines(monkeypatch, {"scripted": ScriptedEngine(lambda request, _: next(replies))})
    runner.run(generate.STAGE, config_with_scripted_generator(), tmp_path)
    rejected = read_parquet(rejected_path(tmp_path, "synthetic"))
    assert rejected["reject_reason"].to_list() == ["refused", "refused"]
    assert "cannot build" in rejected["raw"][0]


def test_unparsed_and_short_outputs_are_rejected_with_the_raw_text(tmp_path: Path, monkeypatch) -> None:
    write_identified_run(tmp_path)
    write_sets(tmp_path, 3)
    engine = scripted_generator(monkeypatch, [None, "Hm.", "Compute 731*6."])
    runner.run(generate.STAGE, config_with_scripted_generator(), tmp_path)
    rejected = read_parquet(rejected_path(tmp_path, "synthetic"))
    assert rejected["reject_reason"].to_list() == ["unparsed", "too_short"]
    assert rejected["problem"].to_list() == [None, "Hm."]
    assert "could not come up" in rejected["raw"][0]
    request = engine.requests[0]
    assert request.task == "generate" and set(request.fields) == {"category", "concepts", "level", "instance"}
    assert isinstance(request.fields["concepts"], list)
    for concept in request.fields["concepts"]:
        assert concept in request.messages[0]["content"]


def test_variants_of_one_concept_set_ask_for_and_get_distinct_problems(tmp_path: Path, monkeypatch) -> None:
    write_identified_run(tmp_path)
    write_table(tmp_path, "concept_sets", pl.DataFrame({
        "set_id": [f"set-{index}" for index in range(12)], "category": ["subtraction"] * 12,
        "concepts": [["subtraction", "borrowing", "two-digit numbers"]] * 12, "level": ["medium"] * 12,
        "instance": list(range(12)),
    }))
    prompts = []
    original = generate.role_request

    def recorded(*args, **kwargs):
        prompts.append(kwargs["text"])
        return original(*args, **kwargs)

    monkeypatch.setattr(generate, "role_request", recorded)
    result = runner.run(generate.STAGE, PipelineConfig(), tmp_path)
    assert "variant" not in prompts[0]
    assert all(f"This is variant {index + 1} of this concept set" in prompts[index] for index in range(1, 12))
    kept = read_table(tmp_path, "synthetic")
    assert kept["problem"].n_unique() == kept.height >= 9  # only the few repeats near-duplicate detection drops
    assert result.info["per_category"] == {"subtraction": {
        "generated": 12, "kept": kept.height, "near_duplicate": 12 - kept.height, "contaminated": 0}}


def test_missing_reference_file_fails_before_writing(tmp_path: Path) -> None:
    write_identified_run(tmp_path)
    write_sets(tmp_path, 3)
    config = noisy_oracle_config(reference_files=[str(tmp_path / "nope.json")])
    with pytest.raises(UserError, match="nope.json: reference file not found"):
        runner.run(generate.STAGE, config, tmp_path)
    assert not table_path(tmp_path, "synthetic").exists()


def test_reference_file_without_problem_field_is_a_user_error(tmp_path: Path) -> None:
    write_identified_run(tmp_path)
    write_sets(tmp_path, 3)
    reference = tmp_path / "odd.json"
    reference.write_text(json.dumps([{"text": "Compute 1+1."}]))
    with pytest.raises(UserError, match="no 'problem' or 'question' field"):
        runner.run(generate.STAGE, noisy_oracle_config(reference_files=[str(reference)]), tmp_path)


def test_benchmark_files_as_references(tmp_path: Path) -> None:
    write_identified_run(tmp_path)
    write_sets(tmp_path, 5)
    references = [str(DATA_DIR / name) for name in ("math500.json", "aime24.json", "aime25.jsonl", "gsm8k_test.jsonl")]
    runner.run(generate.STAGE, noisy_oracle_config(reference_files=references), tmp_path)
    assert read_table(tmp_path, "synthetic").height + read_parquet(rejected_path(tmp_path, "synthetic")).height == 5


def test_empty_concept_sets_give_empty_outputs(tmp_path: Path) -> None:
    write_identified_run(tmp_path)
    write_sets(tmp_path, 0)
    result = runner.run(generate.STAGE, noisy_oracle_config(), tmp_path)
    assert read_table(tmp_path, "synthetic").height == 0
    assert result.info["funnel"] == {"step": "generate", "in": 0, "kept": 0, "rejected": {}}


def test_truncation_is_judged_on_the_problem_and_solutions_are_cut_or_rejected(tmp_path: Path, monkeypatch) -> None:
    from sws.engines import Completion

    outputs = [
        ("### Problem\nCompute 731*6.\n\n---\n\nTo solve this problem, we multiply: 731*6 = 4386.", "stop"),
        ("### Problem\nCompute 48+75. To solve this problem, we need to add: 48 + 75 = 100 + 23 = 123.", "stop"),
        ("### Problem\nCompute 17*3.\n\n### Solution\nTo solve", "length"),  # cut off after its problem ended
        ("### Problem\nCompute 12*(3+", "length"),  # cut off inside its problem
    ]

    class Generator(ScriptedEngine):
        def generate(self, requests):
            self.requests.extend(requests)
            text, reason = outputs[len(self.requests) - 1]  # shards of one request
            return [[Completion(text, 9, reason)] for _ in requests]

    write_identified_run(tmp_path)
    write_sets(tmp_path, 4)
    engine = Generator(lambda request, k: "")
    use_engines(monkeypatch, {"scripted": engine})
    result = runner.run(generate.STAGE, config_with_scripted_generator(), tmp_path)
    assert read_table(tmp_path, "synthetic")["problem"].to_list() == ["Compute 731*6.", "Compute 17*3."]
    rejected = read_parquet(rejected_path(tmp_path, "synthetic"))
    assert rejected["reject_reason"].to_list() == ["solution_leak", "truncated"]
    assert result.info["funnel"]["truncated"] == 2  # cut off at max_tokens, whatever became of the problem
    assert all(request.stop == load_template("generate").stop and "### Solution" in request.stop
               for request in engine.requests)


def test_a_paraphrased_benchmark_problem_is_contaminated_and_the_closest_pairs_are_kept(tmp_path: Path,
                                                                                       monkeypatch) -> None:
    write_identified_run(tmp_path)
    pairs = [json.loads(line) for line in
             (Path(__file__).parents[1] / "fixtures" / "benchmark_paraphrases.jsonl").read_text().splitlines()[:3]]
    reference = tmp_path / "bench.jsonl"
    reference.write_text("".join(json.dumps({"problem": pair["original"]}) + "\n" for pair in pairs))
    write_sets(tmp_path, 4)
    scripted_generator(monkeypatch, [pairs[0]["paraphrase"], "Compute 4321*9.", pairs[2]["paraphrase"],
                                     "A train travels 120 km in 2 hours. What is its average speed in km/h?"])

    result = runner.run(generate.STAGE, config_with_scripted_generator(reference_files=[str(reference)]), tmp_path)

    kept = read_table(tmp_path, "synthetic")
    rejected = read_parquet(rejected_path(tmp_path, "synthetic"))
    assert kept["problem"].to_list() == ["Compute 4321*9.",
                                         "A train travels 120 km in 2 hours. What is its average speed in km/h?"]
    assert rejected["reject_reason"].to_list() == ["contaminated"] * 2
    assert rejected["reject_detail"][0].startswith(f"reference:{reference} (cosine 0.")
    assert rejected["raw"][0].endswith(pairs[0]["paraphrase"] + "\n")
    assert result.info["funnel"]["rejected"] == {"contaminated": 2}
    closest = result.info["closest_benchmark_pairs"]
    assert len(closest) == 4 and [pair["similarity"] for pair in closest] == sorted(
        (pair["similarity"] for pair in closest), reverse=True)
    assert {closest[0]["problem"], closest[1]["problem"]} == {pairs[0]["paraphrase"], pairs[2]["paraphrase"]}


def test_contamination_by_embedding_can_be_turned_off(tmp_path: Path, monkeypatch) -> None:
    write_identified_run(tmp_path)
    pair = json.loads((Path(__file__).parents[1] / "fixtures" / "benchmark_paraphrases.jsonl").read_text()
                      .splitlines()[0])
    reference = tmp_path / "bench.jsonl"
    reference.write_text(json.dumps({"problem": pair["original"]}) + "\n")
    write_sets(tmp_path, 1)
    scripted_generator(monkeypatch, [pair["paraphrase"]])
    runner.run(generate.STAGE, config_with_scripted_generator(reference_files=[str(reference)], contamination_similarity=None),
                 tmp_path)
    assert read_table(tmp_path, "synthetic")["problem"].to_list() == [pair["paraphrase"]]
