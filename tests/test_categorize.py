import json
import re
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
import yaml
from _openai_server import MODEL, serving
from typer.testing import CliRunner

from sws import runner
from sws.artifacts import read_manifest, read_table
from sws.categorize import END_MARKER, Label, category_list, parse_label
from sws.cli import app
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.stages import prepare
from sws.stages.prepare import DATA_DIR
from sws.worlds.math.world import MATH_SUBJECTS

SUBJECTS = list(MATH_SUBJECTS)


def reply(summary: str, domain: str, end: str = END_MARKER) -> str:
    return f"Summary: {summary}\nDomain: {domain}\n{end}"


# ---------------------------------------------------------------- parsing


def test_a_reply_in_the_format_gives_its_domain_in_the_list_spelling_and_its_summary() -> None:
    text = "Let me think about it first.\n" + reply("Counts lattice paths.", "counting and probability")
    assert parse_label(text, SUBJECTS) == Label("Counting & Probability", "Counts lattice paths.")


@pytest.mark.parametrize("text", [
    reply("Counts paths.", "Combinatorics"),  # not in the list
    reply("Counts paths.", "Algebra or Geometry"),
    reply("Counts paths.", "Algebra", end=""),  # no end marker
    reply("Counts paths.", "Algebra") + "\nDomain: Geometry",  # text after the end marker
    "Summary: a\nDomain: Algebra\nDomain: Geometry\n" + END_MARKER,  # two domains
    reply("", "Algebra"),  # no summary
    "Domain: Algebra\n" + END_MARKER,
    "",
])
def test_a_reply_out_of_the_format_or_the_list_gives_no_label(text: str) -> None:
    assert parse_label(text, SUBJECTS) is None


def test_the_list_is_the_configs_else_the_worlds() -> None:
    assert category_list(PipelineConfig.model_validate({"world": "math"})) == SUBJECTS
    assert category_list(PipelineConfig())[:2] == ["addition", "subtraction"]
    assert category_list(PipelineConfig.model_validate({"prepare": {"categories": ["a", "b"]}})) == ["a", "b"]


# ---------------------------------------------------------------- prepare through an OpenAI-compatible server


def categoryless_math(path: Path, n: int) -> tuple[Path, dict[str, str]]:
    """The first n MATH training problems without their `type` field, and each one's true subject."""
    rows = json.loads((DATA_DIR / "math_train.json").read_text())[:n]
    path.write_text("".join(json.dumps({"problem": r["problem"], "answer": r["answer"]}) + "\n" for r in rows))
    return path, {row["problem"]: row["type"] for row in rows}


def problem_of(prompt: str) -> str:
    return re.search(r"Problem:\n(.*)\n\nDo not solve", prompt, re.DOTALL).group(1)


def test_prepare_labels_a_categoryless_math_set_through_a_server_with_retries(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")
    seed, truth = categoryless_math(tmp_path / "dapo_like.jsonl", 12)
    problems = list(truth)
    stubborn, late, sloppy = problems[0], problems[1], problems[2]
    asked: Counter[str] = Counter()

    def categorizer(prompt: str, body: dict) -> str:
        problem = problem_of(prompt)
        asked[problem] += 1
        if problem == stubborn:  # never in the format: stays uncategorized after the retries
            return "This is clearly an algebra problem."
        if problem == late and asked[problem] < 3:  # outside the list twice, then right
            return reply("Solves an equation.", "Calculus")
        if problem == sloppy and asked[problem] == 1:  # no end marker once
            return reply("Finds a value.", truth[problem], end="")
        return reply(f"Asks about problem {problems.index(problem)}.", truth[problem].lower())

    with serving() as server:
        server.writer = categorizer
        role = {"engine": "openai", "model": MODEL, "options": {"base_url": server.base_url}}
        pipeline = tmp_path / "pipeline.yaml"
        pipeline.write_text(yaml.safe_dump({"world": "math", "roles": {"categorizer": role}, "prepare": {
            "input": str(seed), "categorize": True, "categorize_retries": 2}}))
        run = tmp_path / "run"
        result = CliRunner().invoke(app, ["prepare", "--run", str(run), "--config", str(pipeline)])
    assert result.exit_code == 0, result.output
    table = read_table(run, "problems")
    by_problem = {row["problem"]: row for row in table.iter_rows(named=True)}
    assert by_problem[stubborn]["category"] == "uncategorized" and by_problem[stubborn]["category_source"] == "none"
    assert asked[stubborn] == 3 and asked[late] == 3 and asked[sloppy] == 2
    labeled = table.filter(pl.col("category_source") == "model")
    assert labeled.height == 11
    assert all(truth[problem] == category for problem, category in labeled.select("problem", "category").iter_rows())
    assert by_problem[problems[5]]["category_summary"] == "Asks about problem 5."
    funnel = read_manifest(run, "prepare")["info"]["funnel"]
    assert (funnel["step"], funnel["in"], funnel["kept"], funnel["rejected"]) == ("categorize", 12, 11,
                                                                                 {"uncategorized": 1})


def test_categories_given_in_the_input_are_kept_unless_all_are_relabeled(tmp_path: Path) -> None:
    seed = tmp_path / "seed.jsonl"
    seed.write_text(json.dumps({"problem": "What is 17 mod 5?", "answer": "2", "category": "addition"}) + "\n"
                    + json.dumps({"problem": "What is 48 - 19?", "answer": "29"}) + "\n")
    run = tmp_path / "run"
    cfg = PipelineConfig.model_validate({"prepare": {"input": str(seed), "categorize": True}})
    runner.run(prepare.STAGE, cfg, run)
    table = read_table(run, "problems")
    assert table.select("category", "category_source").rows() == [("addition", "input"), ("subtraction", "model")]
    runner.run(prepare.STAGE, cfg.model_copy(update={"prepare": cfg.prepare.model_copy(update={"categorize": "all"})}), run)
    table = read_table(run, "problems")
    assert table.select("category", "category_source").rows() == [("remainders", "model"), ("subtraction", "model")]


def test_a_world_without_a_categorizer_needs_one_set(tmp_path: Path) -> None:
    seed, _ = categoryless_math(tmp_path / "seed.jsonl", 2)
    cfg = PipelineConfig.model_validate({"world": "math", "prepare": {"input": str(seed), "categorize": True}})
    with pytest.raises(UserError, match="roles.categorizer"):
        runner.run(prepare.STAGE, cfg, tmp_path / "run")
    assert not (tmp_path / "run" / "problems.parquet").exists()


def test_the_arith_oracle_labels_a_categoryless_arith_set_all_right(tmp_path: Path) -> None:
    from sws.worlds.arith import generate_problems

    drawn = generate_problems(120, seed=4)
    seed = tmp_path / "seed.jsonl"
    seed.write_text("".join(json.dumps({"problem": p.problem, "answer": p.answer}) + "\n" for p in drawn))
    run = tmp_path / "run"
    runner.run(prepare.STAGE, PipelineConfig.model_validate({"prepare": {"input": str(seed), "categorize": True}}), run)
    table = read_table(run, "problems")
    truth = {p.problem: p.category for p in drawn}
    assert table.height == len(truth) and set(table["category_source"]) == {"model"}
    assert all(truth[problem] == category for problem, category in table.select("problem", "category").iter_rows())
