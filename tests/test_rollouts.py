import json
from pathlib import Path

import polars as pl
import pytest

from sws.errors import UserError
from sws.rollouts import (
    PromptMatcher,
    read_acc_records,
    rollouts_from_acc_records,
    rollouts_from_verl_dumps,
    row_positions,
    seed_positions,
)
from sws.tables import SCHEMAS

FIXTURES = Path(__file__).parent / "fixtures"
DUMPS = FIXTURES / "verl_dumps"

# tests/fixtures/verl_dumps/*: three steps, four responses per prompt; (step, problem_id, n, n_correct) by hand.
VERL_ROLLOUTS = [
    (1, "math-train-0002", 4, 1), (1, "math-train-1740", 4, 4), (1, "math-train-2513", 4, 0),
    (2, "math-train-0002", 4, 2), (2, "math-train-3376", 4, 0), (2, "math-train-4669", 4, 3),
    (3, "math-train-1740", 4, 4), (3, "math-train-2513", 4, 1), (3, "math-train-5537", 4, 2),
]


def fixture_problems() -> pl.DataFrame:
    return pl.read_ndjson(FIXTURES / "math_problems.jsonl")


def as_rows(rollouts: pl.DataFrame) -> list[tuple]:
    assert rollouts.schema == pl.Schema(SCHEMAS["rollouts"])
    return rollouts.rows()


# ---------------------------------------------------------------- prompt matching


def test_matcher_finds_the_problem_inside_a_chat_prompt_with_whitespace_differences() -> None:
    matcher = PromptMatcher(["a", "b"], ["Compute 47+85.", "What is  the value\nof $x$?"])
    assert matcher.match("Compute 47+85.") == "a"
    assert matcher.match("system\nBe brief.\nuser\nWhat is the value of $x$? Think step by step.\nassistant\n") == "b"
    assert matcher.match("user\nCompute 47+86.\nassistant") is None


def test_matcher_prefers_the_longest_contained_problem() -> None:
    matcher = PromptMatcher(["short", "long"], ["Compute 4+5.", "Compute 4+5. Then double the result."])
    assert matcher.match("user: Compute 4+5. Then double the result. Answer:") == "long"
    assert matcher.match("user: Compute 4+5. Answer:") == "short"


def test_matcher_needs_word_boundaries() -> None:
    matcher = PromptMatcher(["p"], ["2+2 equals what?"])
    assert matcher.match("Question: 12+2 equals what?") is None
    assert matcher.match("Question: 2+2 equals what? Answer in a box.") == "p"


# ---------------------------------------------------------------- verl dumps


def test_verl_dump_with_problem_ids_from_the_sws_reward() -> None:
    assert as_rows(rollouts_from_verl_dumps(DUMPS / "with_problem_id", fixture_problems())) == VERL_ROLLOUTS


@pytest.mark.parametrize("dump", ["prompt_only", "v1"])
def test_verl_dump_without_ids_is_joined_to_problems_by_prompt_text_and_answer(dump: str) -> None:
    assert as_rows(rollouts_from_verl_dumps(DUMPS / dump, fixture_problems())) == VERL_ROLLOUTS


def test_two_problems_with_one_text_are_told_apart_by_the_dumped_answer(tmp_path: Path) -> None:
    problems = pl.DataFrame({"problem_id": ["a", "b"], "problem": ["Compute $x$.", "Compute $x$."],
                             "answer": ["1", "\\frac{1}{2}"]})
    dump = write_dump(tmp_path / "dump", "4.jsonl", [
        {"input": "user\nCompute $x$.\nassistant\n", "output": "", "gts": gts, "score": 0.0, "step": 4}
        for gts in ("1", "\\frac{1}{2}", " \\frac{1}{2}")
    ])
    assert as_rows(rollouts_from_verl_dumps(dump, problems)) == [(4, "a", 1, 0), (4, "b", 2, 0)]


def test_verl_dump_indices_resolve_through_the_seed_file() -> None:
    problems = fixture_problems()
    index_ids = seed_positions(FIXTURES / "seed_train.jsonl", problems)
    assert as_rows(rollouts_from_verl_dumps(DUMPS / "with_index", problems, index_ids)) == VERL_ROLLOUTS


def test_verl_dump_indices_that_are_no_row_position_are_an_error_counting_them() -> None:
    # Only index 2 is a row position of the 7 problems; the other 7 prompts x 4 responses match nothing.
    with pytest.raises(UserError, match=r"28 of 36 response lines match no problem .*index 1740"):
        rollouts_from_verl_dumps(DUMPS / "with_index", fixture_problems())


def write_dump(folder: Path, name: str, lines: list[dict]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


def test_verl_acc_wins_over_score_and_score_counts_above_one_half(tmp_path: Path) -> None:
    problems = fixture_problems()
    pid = problems["problem_id"][0]
    lines = [
        {"input": "x", "score": -1.0, "step": 12, "acc": True, "problem_id": pid},  # DAPO-style reward, right answer
        {"input": "x", "score": 1.0, "step": 12, "acc": 0, "problem_id": pid},
        {"input": "x", "score": 1.1, "step": 12, "problem_id": pid},  # format bonus on a right answer
        {"input": "x", "score": 0.1, "step": 12, "problem_id": pid},  # format bonus only
        # sws reward without extra_info: falls back to the prompt text and the answer
        {"input": f"user\n{problems['problem'][0]}\nassistant\n", "gts": problems["answer"][0], "score": 1,
         "step": 12, "problem_id": ""},
    ]
    dump = write_dump(tmp_path / "dump", "12.jsonl", lines)
    assert as_rows(rollouts_from_verl_dumps(dump, problems)) == [(12, pid, 5, 3)]


def test_verl_responses_the_reward_could_not_grade_count_in_no_n(tmp_path: Path) -> None:
    problems = fixture_problems()
    right, slow = problems["problem_id"][0], problems["problem_id"][1]
    dump = write_dump(tmp_path / "dump", "3.jsonl", [
        {"input": "x", "score": 1.0, "step": 3, "acc": True, "graded": True, "problem_id": right},
        {"input": "x", "score": 0.0, "step": 3, "acc": False, "graded": False, "problem_id": right},
        {"input": "x", "score": 0.0, "step": 3, "acc": False, "problem_id": right},  # another reward: graded
        {"input": "x", "score": 0.0, "step": 3, "acc": False, "graded": False, "problem_id": slow},
    ])
    assert as_rows(rollouts_from_verl_dumps(dump, problems)) == [(3, right, 2, 1)]


@pytest.mark.parametrize("content, message", [
    ("not json\n", "not valid JSONL"),
    ('{"input": "x", "score": 1, "problem_id": "math-train-0002"}\n', "1 lines lack a numeric 'step'"),
    ('{"input": "x", "step": 1, "problem_id": "math-train-0002"}\n', "lack a numeric 'score'"),
    ('{"input": "x", "step": 1.5, "score": 1, "problem_id": "math-train-0002"}\n', "'step' must be an integer"),
    ('{"input": "x", "step": 1e20, "score": 1, "problem_id": "math-train-0002"}\n', "'step' must be an integer from 0"),
    ('{"input": "x", "step": -3, "score": 1, "problem_id": "math-train-0002"}\n', "'step' must be an integer from 0"),
    ('{"input": "x", "step": 1, "score": 1, "index": 1e23}\n', "'index' must be an integer from 0"),
    ('{"input": "x", "step": 1, "score": 1, "index": "first"}\n', "'index' must be an integer from 0"),
    ('{"input": "x", "step": 1, "score": 1, "index": -1}\n', "'index' must be an integer from 0"),
])
def test_bad_verl_lines_are_user_errors_naming_the_file(tmp_path: Path, content: str, message: str) -> None:
    dump = tmp_path / "dump"
    dump.mkdir()
    (dump / "3.jsonl").write_text(content)
    with pytest.raises(UserError, match=message) as error:
        rollouts_from_verl_dumps(dump, fixture_problems())
    assert "3.jsonl" in str(error.value)


def test_missing_or_empty_dump_folder(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a directory"):
        rollouts_from_verl_dumps(tmp_path / "nowhere", fixture_problems())
    with pytest.raises(UserError, match="no <step>.jsonl files"):
        rollouts_from_verl_dumps(tmp_path, fixture_problems())


def test_a_dump_without_response_lines_is_refused(tmp_path: Path) -> None:
    (tmp_path / "1.jsonl").write_text("")
    (tmp_path / "2.jsonl").write_text("\n")
    with pytest.raises(UserError, match="hold no response line"):
        rollouts_from_verl_dumps(tmp_path, fixture_problems())


def test_entries_that_are_not_files_are_skipped(tmp_path: Path) -> None:
    (tmp_path / "1.jsonl").mkdir()
    with pytest.raises(UserError, match="no <step>.jsonl files"):
        rollouts_from_verl_dumps(tmp_path, fixture_problems())
    (tmp_path / "2.jsonl").write_bytes((FIXTURES / "verl_dumps" / "with_problem_id" / "1.jsonl").read_bytes())
    assert rollouts_from_verl_dumps(tmp_path, fixture_problems()).height > 0


def test_a_prompt_whose_answer_is_not_the_problems_is_unmatched(tmp_path: Path) -> None:
    problems = fixture_problems()
    dump = write_dump(tmp_path / "dump", "1.jsonl", [
        {"input": f"user\n{problems['problem'][0]}\nassistant\n", "gts": "5", "score": 1, "step": 1},
    ])
    with pytest.raises(UserError, match="1 of 1 response lines match no problem .*with answer '5'"):
        rollouts_from_verl_dumps(dump, problems)


def test_unknown_problem_id_is_unmatched_not_guessed_from_the_text(tmp_path: Path) -> None:
    problems = fixture_problems()
    dump = write_dump(tmp_path / "dump", "1.jsonl", [
        {"input": problems["problem"][0], "score": 1, "step": 1, "problem_id": "elsewhere"},
    ])
    with pytest.raises(UserError, match="1 of 1 response lines .*problem_id 'elsewhere'"):
        rollouts_from_verl_dumps(dump, problems)


# ---------------------------------------------------------------- acc_records.json


def test_acc_records_through_the_seed_file_index() -> None:
    problems = fixture_problems()
    rollouts = rollouts_from_acc_records(FIXTURES / "acc_records.json", problems,
                                         seed_positions(FIXTURES / "seed_train.jsonl", problems))
    # every accuracy is a multiple of 1/8, so every record reads back as k of 8 rollouts
    assert set(rollouts["n"]) == {8}
    by_problem = {pid: group.sort("step")["n_correct"].to_list()
                  for (pid,), group in rollouts.group_by("problem_id")}
    assert by_problem == {
        "math-train-0002": [2, 4, 3, 4], "math-train-1740": [8, 8], "math-train-2513": [0, 0, 0],
        "math-train-3376": [1], "math-train-4669": [6, 4, 2], "math-train-5537": [4, 5],
    }
    assert rollouts.filter(pl.col("problem_id") == "math-train-4669")["step"].to_list() == [0, 1, 2]


def write_acc(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "acc_records.json"
    path.write_text(json.dumps(data))
    return path


def test_acc_records_index_defaults_to_row_position(tmp_path: Path) -> None:
    problems = fixture_problems()
    path = write_acc(tmp_path, {"train": {"0": [1 / 3, 0.5], "6": [0.0]}})
    # denominators 3 and 2 -> 6 rollouts per record
    assert as_rows(rollouts_from_acc_records(path, problems)) == [
        (0, problems["problem_id"][0], 6, 2), (0, problems["problem_id"][6], 6, 0), (1, problems["problem_id"][0], 6, 3),
    ]
    assert read_acc_records(path).columns == ["index", "step", "n", "n_correct"]


def test_acc_records_index_past_the_problems_is_an_error(tmp_path: Path) -> None:
    path = write_acc(tmp_path, {"train": {"0": [0.5], "7": [0.5, 0.25], "9": [1.0]}})
    with pytest.raises(UserError, match=r"3 of 4 records match no problem"):
        rollouts_from_acc_records(path, fixture_problems())


@pytest.mark.parametrize("data, message", [
    ({"test": {"0": [0.5]}}, "'train' mapping"),
    ({"train": {}}, "'train' mapping"),
    ({"train": {"first": [0.5]}}, "key 'first'"),
    ({"train": {str(10**23): [0.5]}}, f"key '{10**23}' under 'train' is not an integer index from 0"),
    ({"train": {"\u00b2": [0.5]}}, "key '\u00b2' under 'train' is not an integer index"),
    ({"train": {"0": [0.5, 1.5]}}, r"'train.0' must be a list of accuracies"),
    ({"train": {"0": 0.5}}, r"'train.0' must be a list"),
    ({"train": {"0": [True]}}, r"'train.0' must be a list"),
])
def test_bad_acc_records_are_user_errors(tmp_path: Path, data: object, message: str) -> None:
    with pytest.raises(UserError, match=message):
        read_acc_records(write_acc(tmp_path, data))


def test_acc_records_not_json(tmp_path: Path) -> None:
    path = tmp_path / "acc_records.json"
    path.write_text("{'train': ")
    with pytest.raises(UserError, match="not valid JSON"):
        read_acc_records(path)
    with pytest.raises(UserError, match="file not found"):
        read_acc_records(tmp_path / "missing.json")


# ---------------------------------------------------------------- seed files


def test_seed_positions_use_extra_info_index_and_leave_out_unknown_problems() -> None:
    problems = fixture_problems()
    table = seed_positions(FIXTURES / "seed_train.jsonl", problems)
    assert dict(table.rows()) == {int(pid.removeprefix("math-train-")): pid for pid in problems["problem_id"]}


def test_seed_positions_from_an_index_column_or_row_order(tmp_path: Path) -> None:
    problems = fixture_problems()
    seed = problems.select("problem", "answer").reverse()
    seed.with_columns(index=pl.Series([70, 60, 50, 40, 30, 20, 10])).write_parquet(tmp_path / "with_index.parquet")
    seed.write_ndjson(tmp_path / "plain.jsonl")
    reversed_ids = problems["problem_id"].reverse().to_list()
    assert seed_positions(tmp_path / "with_index.parquet", problems).rows() == list(
        zip([70, 60, 50, 40, 30, 20, 10], reversed_ids, strict=True))
    assert seed_positions(tmp_path / "plain.jsonl", problems).rows() == list(enumerate(reversed_ids))
    assert row_positions(problems).rows() == list(enumerate(problems["problem_id"]))


def test_seed_file_problems(tmp_path: Path) -> None:
    problems = fixture_problems()
    (tmp_path / "repeated.jsonl").write_text('{"problem": "a", "index": 1}\n{"problem": "b", "index": 1}\n')
    with pytest.raises(UserError, match="'index' repeats"):
        seed_positions(tmp_path / "repeated.jsonl", problems)
    (tmp_path / "textless.jsonl").write_text('{"text": "a"}\n')
    with pytest.raises(UserError, match="no problem text field"):
        seed_positions(tmp_path / "textless.jsonl", problems)
    (tmp_path / "broken.json").write_text("[{")
    with pytest.raises(UserError, match="broken.json: not a readable"):
        seed_positions(tmp_path / "broken.json", problems)
