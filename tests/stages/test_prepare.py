import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from sws import runner
from sws.cli import app
from sws.config import PipelineConfig, PrepareConfig
from sws.records import canonical_categories, content_id, load_preset_benchmark
from sws.run_dir import RunDir
from sws.stages import prepare
from sws.stages.prepare import DATA_DIR as DATA
from sws.tables import SCHEMAS, read_table, rejected_path, table_path
from sws.worlds.math.world import MATH_SUBJECTS


def sws(*args: str):
    return CliRunner().invoke(app, [*args])


def write_json_list(path: Path, rows: list[dict]) -> Path:
    path.write_text(json.dumps(rows))
    return path


def prepared(tmp_path: Path, rows: list[dict], **settings) -> tuple[pl.DataFrame, pl.DataFrame]:
    source = write_json_list(tmp_path / "seed.json", rows)
    run_dir = tmp_path / "run"
    cfg = PipelineConfig(prepare=PrepareConfig(input=str(source), **settings))
    runner.run(prepare.STAGE, cfg, run_dir)
    return read_table(run_dir, "problems"), pl.read_parquet(rejected_path(run_dir, "problems"))


# ---------------------------------------------------------------- the shipped files


def test_math_train_gives_its_problems_in_the_seven_math_subjects(tmp_path):
    result = sws("prepare", "--input", str(DATA / "math_train.json"), "--run", str(tmp_path / "run"))
    assert result.exit_code == 0, result.output
    problems = read_table(tmp_path / "run", "problems")
    rejected = pl.read_parquet(rejected_path(tmp_path / "run", "problems"))
    # 7,474 rows: 4 have no answer, 1 repeats another problem up to a double space.
    assert problems.height + rejected.height == 7474
    assert problems.height == 7469
    assert sorted(rejected["reject_reason"].to_list()) == ["duplicate_problem"] + ["missing_answer"] * 4
    assert set(problems["category"]) == set(MATH_SUBJECTS)
    assert problems["problem_id"].n_unique() == problems.height
    assert problems["source"].unique().to_list() == ["math"]
    assert "difficulty" in problems.columns  # extra fields are kept


def test_problem_ids_are_the_same_in_every_run(tmp_path):
    for run in ("first", "second"):
        assert sws("prepare", "--input", str(DATA / "math500.json"), "--run", str(tmp_path / run)).exit_code == 0
    first, second = (read_table(tmp_path / run, "problems") for run in ("first", "second"))
    assert first["problem_id"].to_list() == second["problem_id"].to_list()


@pytest.mark.parametrize(
    ("file", "n_problems", "categories", "first_answer"),
    [
        ("math500.json", 500, set(MATH_SUBJECTS), "\\left( 3, \\frac{\\pi}{2} \\right)"),
        ("aime24.json", 30, {"uncategorized"}, "204"),
        ("aime25.jsonl", 30, {"uncategorized"}, "70"),
        ("gsm8k_test.jsonl", 1319, {"uncategorized"}, "18"),
    ],
)
def test_each_benchmark_file_is_recognised_from_its_name(tmp_path, file, n_problems, categories, first_answer):
    result = sws("prepare", "--input", str(DATA / file), "--run", str(tmp_path / "run"))
    assert result.exit_code == 0, result.output
    problems = read_table(tmp_path / "run", "problems")
    assert problems.height == n_problems
    assert set(problems["category"]) == categories
    assert problems["answer"][0] == first_answer


def test_math500_ids_and_subjects_come_from_unique_id():
    problems = load_preset_benchmark("math500")
    first = problems.row(0, named=True)
    assert first["problem_id"] == "test/precalculus/807.json"
    assert first["category"] == "Precalculus"
    assert problems.filter(pl.col("problem_id").str.contains("counting_and_probability"))["category"].unique()\
        .to_list() == ["Counting & Probability"]


def test_gsm8k_answer_is_the_number_after_the_marker_and_the_solution_is_kept():
    problems = load_preset_benchmark("gsm8k")
    assert problems["answer"].str.contains(r"^-?[\d.]+$").all()
    thousands = problems.filter(pl.col("solution").str.contains(r"#### 1,450,000"))
    assert thousands["answer"].to_list() == ["1450000"]
    assert problems["solution"][0].endswith("#### 18")


def test_aime25_keeps_its_ids():
    assert load_preset_benchmark("aime25")["problem_id"][:2].to_list() == ["aime25-0", "aime25-1"]


def test_explicit_preset_overrides_the_file_name(tmp_path):
    copy = tmp_path / "questions.jsonl"
    copy.write_text((DATA / "gsm8k_test.jsonl").read_text())
    assert sws("prepare", "--input", str(copy), "--run", str(tmp_path / "run"), "--preset", "gsm8k").exit_code == 0
    assert read_table(tmp_path / "run", "problems")["answer"][0] == "18"


# ---------------------------------------------------------------- formats and fields

ROWS = [
    {"question": "What is 1+1?", "final": "2", "topic": "Algebra", "uid": "q1", "level": 1},
    {"question": "What is 2+3?", "final": 5, "topic": "Number Theory", "uid": "q2", "level": 2},
]


@pytest.mark.parametrize("suffix", [".json", ".jsonl", ".parquet"])
def test_json_list_jsonl_and_parquet_give_the_same_table(tmp_path, suffix):
    source = tmp_path / f"seed{suffix}"
    if suffix == ".json":
        write_json_list(source, ROWS)
    elif suffix == ".jsonl":
        source.write_text("".join(json.dumps(row) + "\n" for row in ROWS))
    else:
        pl.DataFrame([{**row, "final": str(row["final"])} for row in ROWS]).write_parquet(source)
    result = sws("prepare", "--input", str(source), "--run", str(tmp_path / "run"), "--problem-field", "question",
                 "--answer-field", "final", "--category-field", "topic", "--id-field", "uid")
    assert result.exit_code == 0, result.output
    problems = read_table(tmp_path / "run", "problems")
    assert problems.select("problem_id", "problem", "answer", "category").rows() == [
        ("q1", "What is 1+1?", "2", "Algebra"), ("q2", "What is 2+3?", "5", "Number Theory"),
    ]
    assert problems["level"].to_list() == [1, 2]
    assert problems["source"].to_list() == ["seed", "seed"]
    assert list(problems.columns[:5]) == list(SCHEMAS["problems"])


def test_generic_field_names_are_found_without_options(tmp_path):
    problems, _ = prepared(tmp_path, [{"prompt": "Compute 47+85.", "expected_answer": "132", "subject": "addition"}])
    assert problems.select("problem", "answer", "category").row(0) == ("Compute 47+85.", "132", "addition")


def test_a_field_named_like_an_output_column_is_kept_under_another_name(tmp_path):
    problems, _ = prepared(tmp_path, [{"problem": "p", "answer": "1", "category": "raw", "topic": "Geometry"}],
                           category_field="topic")
    assert problems.select("category", "original_category").row(0) == ("Geometry", "raw")


def test_an_input_source_field_becomes_the_source(tmp_path):
    problems, _ = prepared(tmp_path, [{"problem": "p", "answer": "1", "source": "olympiads"},
                                      {"problem": "q", "answer": "2", "source": None}])
    assert problems["source"].to_list() == ["olympiads", "seed"]


# ---------------------------------------------------------------- categories


def test_spellings_of_one_category_become_one():
    spellings = ["Counting & Probability", "Counting_Probability", "counting and probability", "counting-probability"]
    assert set(canonical_categories(spellings).values()) == {"Counting & Probability"}
    assert canonical_categories(["intermediate_algebra", "PREALGEBRA", "Pre-Algebra"]) == {
        "intermediate_algebra": "Intermediate Algebra", "PREALGEBRA": "Prealgebra", "Pre-Algebra": "Prealgebra",
    }


def test_arith_categories_keep_their_snake_case_names():
    assert canonical_categories(["multi_step", "Multi-Step", "remainders"]) == {
        "multi_step": "multi_step", "Multi-Step": "multi_step", "remainders": "remainders",
    }


def test_unknown_categories_take_their_most_common_spelling(tmp_path):
    rows = [{"problem": f"p{i}", "answer": "1", "category": name}
            for i, name in enumerate(["Calculus", "calculus", "Calculus", "Linear_Algebra"])]
    problems, _ = prepared(tmp_path, rows)
    assert problems["category"].to_list() == ["Calculus", "Calculus", "Calculus", "Linear_Algebra"]


def test_the_category_list_keeps_only_its_categories_in_its_spelling(tmp_path):
    rows = [{"problem": f"p{i}", "answer": "1", "category": name}
            for i, name in enumerate(["number_theory", "Geometry", "Number Theory", "Algebra"])]
    problems, rejected = prepared(tmp_path, rows, categories=["number theory", "algebra"])
    assert problems["category"].to_list() == ["number theory", "number theory", "algebra"]
    assert rejected.select("problem", "category", "reject_reason").rows() == [
        ("p1", "Geometry", "category_not_allowed"),
    ]


def test_categories_option_on_the_command_line(tmp_path):
    result = sws("prepare", "--input", str(DATA / "math500.json"), "--run", str(tmp_path / "run"),
                 "--categories", "Geometry, precalculus")
    assert result.exit_code == 0, result.output
    assert set(read_table(tmp_path / "run", "problems")["category"]) == {"Geometry", "precalculus"}


# ---------------------------------------------------------------- ids and rejects


def test_problem_id_is_a_hash_of_the_text_with_whitespace_collapsed():
    assert content_id("What is  1+1?\n") == content_id("What is 1+1?")
    assert content_id("What is 1+1?") != content_id("What is 1+2?")


def test_rejects_go_to_the_sidecar_with_their_reason(tmp_path):
    rows = [
        {"problem": "Find x.", "answer": "1"},
        {"problem": "  ", "answer": "2"},
        {"problem": None, "answer": "2"},
        {"problem": "Find y.", "answer": None},
        {"problem": "Find z.", "answer": " "},
        {"problem": "Find   x.", "answer": "1"},
        {"problem": "Find w.", "answer": "4"},
    ]
    problems, rejected = prepared(tmp_path, rows)
    assert problems["problem"].to_list() == ["Find x.", "Find w."]
    assert sorted(rejected["reject_reason"].to_list()) == sorted(
        ["empty_problem", "empty_problem", "missing_answer", "missing_answer", "duplicate_problem"])
    assert set(rejected.columns) == set(problems.columns) | {"reject_reason"}


def test_a_repeat_of_an_unusable_row_is_kept(tmp_path):
    problems, rejected = prepared(tmp_path, [{"problem": "Find x.", "answer": None},
                                             {"problem": "Find x.", "answer": "3"}])
    assert problems["answer"].to_list() == ["3"]
    assert rejected["reject_reason"].to_list() == ["missing_answer"]


def test_a_repeated_given_id_is_rejected(tmp_path):
    problems, rejected = prepared(tmp_path, [{"id": "a", "problem": "p", "answer": "1"},
                                             {"id": "a", "problem": "q", "answer": "2"},
                                             {"id": None, "problem": "r", "answer": "3"}])
    assert problems["problem_id"].to_list() == ["a", content_id("r")]
    assert rejected.select("problem", "reject_reason").rows() == [("q", "duplicate_id")]


def test_a_stage_with_unchanged_input_is_skipped_and_a_changed_one_reruns(tmp_path):
    source = write_json_list(tmp_path / "seed.json", [{"problem": "p", "answer": "1"}])
    cfg = PipelineConfig(prepare=PrepareConfig(input=str(source)))
    assert not runner.run(prepare.STAGE, cfg, tmp_path / "run").skipped
    assert runner.run(prepare.STAGE, cfg, tmp_path / "run").skipped
    write_json_list(source, [{"problem": "p", "answer": "1"}, {"problem": "q", "answer": "2"}])
    result = runner.run(prepare.STAGE, cfg, tmp_path / "run")
    assert not result.skipped
    assert result.rows["problems"] == 2


# ---------------------------------------------------------------- bad input: one line, exit 2, nothing lost


def bad_inputs(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    """name -> (extra CLI arguments, a phrase the error must contain)."""
    garbage = tmp_path / "garbage.json"
    garbage.write_text("[{\"problem\": \"unterminated")
    empty = write_json_list(tmp_path / "empty.json", [])
    numbers = write_json_list(tmp_path / "numbers.json", [{"problem": 12, "answer": "1"}])
    lists = write_json_list(tmp_path / "lists.json", [{"problem": "p", "answer": [1, 2]}])
    good = tmp_path / "good.json"
    nothing_usable = write_json_list(tmp_path / "unusable.json", [{"problem": "p", "answer": None}])
    return {
        "missing file": (["--input", str(tmp_path / "nope.json")], "file not found"),
        "unparseable file": (["--input", str(garbage)], "not a readable"),
        "missing column": (["--input", str(good), "--problem-field", "statement"], "no field 'statement'"),
        "wrong type (number)": (["--input", str(numbers)], "expected text"),
        "wrong type (list)": (["--input", str(lists)], "expected text or numbers"),
        "empty table": (["--input", str(empty)], "has no rows"),
        "nothing usable": (["--input", str(nothing_usable)], "none of its 1 rows is usable"),
        "unknown preset": (["--input", str(good), "--preset", "mmlu"], "unknown preset 'mmlu'"),
    }


def test_bad_input_ends_in_one_line_and_exit_2_and_leaves_earlier_artifacts_untouched(tmp_path):
    run_dir = tmp_path / "run"
    write_json_list(tmp_path / "good.json", [{"problem": "Find x.", "answer": "1", "category": "Algebra"}])
    assert sws("prepare", "--input", str(tmp_path / "good.json"), "--run", str(run_dir)).exit_code == 0
    earlier = [table_path(run_dir, "problems"), rejected_path(run_dir, "problems"), RunDir(run_dir).manifest("prepare"),
               run_dir / "config.yaml"]
    before = {path: path.read_bytes() for path in earlier}
    for name, (arguments, phrase) in bad_inputs(tmp_path).items():
        result = sws("prepare", "--run", str(run_dir), *arguments)
        assert result.exit_code == 2, (name, result.output)
        assert result.stdout == "", name
        lines = result.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), (name, result.stderr)
        assert phrase in lines[0], (name, lines[0])
        assert "Traceback" not in result.output
        assert {path: path.read_bytes() for path in earlier} == before, name


def test_max_problems_draws_a_seeded_sample_in_file_order(tmp_path):
    full = read_table(prepare_math500(tmp_path / "full"), "problems")
    samples = [read_table(prepare_math500(tmp_path / run, max_problems=120), "problems") for run in ("a", "b")]
    assert samples[0].height == 120 and samples[0].equals(samples[1])
    positions = [full["problem_id"].to_list().index(pid) for pid in samples[0]["problem_id"]]
    assert positions == sorted(positions) and positions != list(range(120))
    assert samples[0]["category"].n_unique() == full["category"].n_unique()


def prepare_math500(run_dir, **settings):
    cfg = PipelineConfig.model_validate({"prepare": {"input": str(DATA / "math500.json"), **settings}})
    runner.run(prepare.STAGE, cfg, run_dir)
    return run_dir


def test_prepare_without_a_config_names_the_world_and_roles_it_chose(tmp_path):
    seed = write_json_list(tmp_path / "my.json", [{"problem": "Compute 1+1.", "answer": "2", "category": "addition"}])
    chosen = sws("prepare", "--input", str(seed), "--run", str(tmp_path / "run"))
    assert chosen.exit_code == 0, chosen.output
    lines = [line for line in chosen.stderr.splitlines() if "no --config" in line]
    assert len(lines) == 1 and "world 'arith'" in lines[0] and "generator" in lines[0] and "oracle" in lines[0]
    again = sws("prepare", "--input", str(seed), "--run", str(tmp_path / "run"), "--force")
    assert "no --config" not in again.stderr  # the run's config.yaml chose this time
