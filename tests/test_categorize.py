import json
from collections import Counter
from pathlib import Path

import polars as pl
import pytest
import yaml
from _openai_server import MODEL, serving
from typer.testing import CliRunner

from sws import runner
from sws.categorize import (
    END_MARKER,
    NO_DOMAIN,
    NO_SUMMARY,
    TRUNCATED,
    TWO_DOMAINS,
    TWO_SUMMARIES,
    UNLISTED,
    Label,
    categorize_prompt,
    category_list,
    parse_label,
    read_label,
)
from sws.cli import app
from sws.config import PipelineConfig, PrepareConfig
from sws.engines import Completion
from sws.errors import UserError
from sws.manifests import read_manifest
from sws.records import DATA_DIR
from sws.stages import prepare
from sws.tables import read_table
from sws.worlds.math.world import MATH_SUBJECTS, MathWorld

SUBJECTS = list(MATH_SUBJECTS)


def reply(summary: str, domain: str, end: str = "") -> str:
    return f"Summary: {summary}\nDomain: {domain}" + (f"\n{end}" if end else "")


# ---------------------------------------------------------------- parsing


@pytest.mark.parametrize(("text", "category", "summary"), [
    ("Let me think about it first.\n" + reply("Counts lattice paths.", "counting and probability", END_MARKER),
     "Counting & Probability", "Counts lattice paths."),
    (reply("Finds a chance.", "Probability"), "Counting & Probability", "Finds a chance."),  # the one containing it
    ("**Summary:** Solves for x.\n\n**Domain:** **Algebra**", "Algebra", "Solves for x."),
    ("Summary: Finds a remainder.\nDomain: Number Theory.", "Number Theory", "Finds a remainder."),
    (reply("Finds a root.", "Intermediate Algebra: polynomials and their roots"), "Intermediate Algebra",
     "Finds a root."),
    ("Summary:\nAsks for an area\nof a triangle.\n\nDomain: Geometry\n" + END_MARKER, "Geometry",
     "Asks for an area of a triangle."),
    (reply("Solves x + 1 = 2.", "Algebra") + "\n\nThis is a linear equation.", "Algebra", "Solves x + 1 = 2."),
    (reply("Solves <script>alert(1)</script>x\x07 + 1 = 2\u202e.", "Algebra"), "Algebra", "Solves x + 1 = 2."),
])
def test_a_reply_a_reader_takes_a_label_from_gives_its_domain_in_the_list_spelling(text: str, category: str,
                                                                                    summary: str) -> None:
    assert parse_label(text, SUBJECTS) == Label(category, summary)


@pytest.mark.parametrize(("text", "reason"), [
    (reply("Counts paths.", "Combinatorics"), UNLISTED),
    (reply("Counts paths.", "Algebra or Geometry"), UNLISTED),
    (reply("Counts paths.", "Algebra and Geometry"), UNLISTED),
    (reply("Counts paths.", "Algebra", END_MARKER) + "\nDomain: Geometry", TWO_DOMAINS),
    ("Summary: a\nDomain: Algebra\nDomain: Geometry", TWO_DOMAINS),
    (reply("", "Algebra"), NO_SUMMARY),
    ("Domain: Algebra\n" + END_MARKER, NO_SUMMARY),
    ("Summary: a\nSummary: b\nDomain: Algebra", TWO_SUMMARIES),
    (reply("Counts paths.", ""), NO_DOMAIN),
    ("This is clearly an algebra problem.", NO_DOMAIN),
    ("", NO_DOMAIN),
])
def test_a_reply_a_reader_would_reject_gives_no_label_and_says_why(text: str, reason: str) -> None:
    assert parse_label(text, SUBJECTS) == reason


def test_a_short_form_two_listed_categories_contain_names_neither() -> None:
    categories = ["Linear Algebra", "Abstract Algebra", "Geometry"]
    assert parse_label(reply("a", "Algebra"), categories) == UNLISTED
    assert parse_label(reply("a", "linear algebra"), categories) == Label("Linear Algebra", "a")


def test_a_cut_off_reply_gives_no_label_whatever_it_says() -> None:
    text = reply("Counts paths.", "Counting & Probability")
    assert read_label(Completion(text, 20, "length"), SUBJECTS) == TRUNCATED
    assert read_label(Completion(text, 20, "stop"), SUBJECTS) == Label("Counting & Probability", "Counts paths.")


# ---------------------------------------------------------------- the prompt


def test_the_prompt_describes_each_domain_in_one_line_and_shows_examples_when_asked() -> None:
    cfg = PipelineConfig.model_validate({"world": "math"})
    listing = categorize_prompt(cfg).listing.splitlines()
    assert [line.split(":")[0] for line in listing] == [f"- {subject}" for subject in SUBJECTS]
    assert all(len(line) > 40 for line in listing)
    plain = categorize_prompt(cfg).render("What is $1+1$?")
    assert "Examples" not in plain and plain.count("Problem:") == 1
    shown = categorize_prompt(cfg.model_copy(update={"prepare": PrepareConfig(categorize_examples=True)}))
    text = shown.render("What is $1+1$?")
    assert text.count("Problem:") == len(SUBJECTS) + 1
    assert text.index("What is $1+1$?") > text.index("Domain: Precalculus")  # the examples come first
    assert all(parse_label(block, SUBJECTS) == Label(subject, MathWorld.category_examples[subject].summary)
               for subject, block in zip(SUBJECTS, shown.examples.split("Problem:")[1:], strict=True))
    assert shown.digest != categorize_prompt(cfg).digest


def test_categories_the_world_does_not_describe_are_listed_by_name() -> None:
    cfg = PipelineConfig.model_validate({"world": "math", "prepare": {"categories": ["Geometry", "Topology"]}})
    listing = categorize_prompt(cfg).listing.splitlines()
    assert listing[0].startswith("- Geometry: lengths") and listing[1] == "- Topology"


def test_the_arith_world_describes_its_categories_from_its_families() -> None:
    listing = categorize_prompt(PipelineConfig()).listing
    assert "- remainders: expressions that take division, remainder of division" in listing
    with pytest.raises(UserError, match="prepare.categorize_examples: world 'arith' has no example"):
        categorize_prompt(PipelineConfig.model_validate({"prepare": {"categorize_examples": True}}))


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
    """The problem a categorize prompt asks about (the last one shown: examples come before it)."""
    return prompt.rsplit("Problem:\n", 1)[1].split("\n\nDo not solve", 1)[0]


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
        if problem == sloppy and asked[problem] == 1:  # two domains once
            return reply("Finds a value.", truth[problem]) + "\nDomain: Geometry"
        return reply(f"Asks about problem {problems.index(problem)}.", truth[problem].lower())

    with serving() as server:
        server.writer = categorizer
        role = {"engine": "openai", "model": MODEL, "temperature": 0.0, "options": {"base_url": server.base_url}}
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
    # At temperature 0 a retry would get the same reply: retries sample at the role's retry_temperature.
    temperatures = [(problem_of(body["messages"][-1]["content"]), body["temperature"]) for _, body in server.posts]
    assert sorted(t for problem, t in temperatures if problem == stubborn) == [0.0, 0.7, 0.7]
    assert Counter(t for _, t in temperatures) == {0.0: 12, 0.7: 5}
    funnel = read_manifest(run, "prepare")["info"]["funnel"]
    assert (funnel["step"], funnel["in"], funnel["kept"], funnel["rejected"]) == ("categorize", 12, 11,
                                                                                 {"uncategorized": 1})
    assert funnel["replies_rejected"] == {"no_domain": 3, "unlisted_domain": 2, "two_domains": 1}


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
