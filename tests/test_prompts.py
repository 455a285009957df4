from __future__ import annotations

from pathlib import Path

import pytest
from word_world import WORLD

from sws.errors import UserError
from sws.prompts import TEMPLATE_NAMES, load_template, parse_template

# What each synthesis step passes to its template; the step modules render with exactly these names.
STEP_VALUES = {
    "extract": {"problem": "Compute 47+85.", "category": "addition", "k": 5},
    "generate": {"category": "addition", "level": "hard", "concepts": "- carrying\n- place value",
                 "request": "This is variant 2 of this concept set."},
    "rate": {"problem": "Compute 47+85."},
    "label": {"problem": "Compute 47+85."},
    "categorize": {"problem": "Compute 47+85.", "categories": "- addition\n- subtraction"},
}


@pytest.mark.parametrize("name", TEMPLATE_NAMES)
def test_shipped_template_renders_every_value_it_is_given(name: str) -> None:
    template = load_template(name)
    text = template.render(STEP_VALUES[name])
    for value in STEP_VALUES[name].values():
        assert str(value) in text
    assert "{{" not in text


@pytest.mark.parametrize("name", ["extract", "label"])
def test_problem_text_reaches_the_extraction_and_answering_prompts(name: str) -> None:
    problem = "A unique problem text 8271: compute 8271 mod 13."
    text = load_template(name).render({**STEP_VALUES[name], "problem": problem})
    assert problem in text


def test_missing_value_fails_loudly() -> None:
    template = load_template("extract")
    with pytest.raises(UserError, match="placeholder 'problem' has no value"):
        template.render({"category": "addition", "k": 5})


def test_unused_value_fails_loudly() -> None:
    template = parse_template("label", "---\nplaceholders: [problem]\n---\nSolve {{problem}}.\n", "label.md")
    with pytest.raises(UserError, match="does not use 'category'"):
        template.render({"problem": "Compute 1+2.", "category": "addition"})


def test_template_that_drops_a_declared_placeholder_does_not_load() -> None:
    text = "---\nplaceholders: [problem, category]\n---\nList concepts of this {{category}} problem.\n"
    with pytest.raises(UserError, match="declares 'problem' but the body never uses it"):
        parse_template("extract", text, "extract.md")


def test_template_with_an_undeclared_placeholder_does_not_load() -> None:
    text = "---\nplaceholders: [problem]\n---\n{{problem}} in {{category}}\n"
    with pytest.raises(UserError, match="uses \\{\\{category\\}\\}"):
        parse_template("extract", text, "extract.md")


def test_template_without_header_does_not_load() -> None:
    with pytest.raises(UserError, match="placeholders"):
        parse_template("label", "Solve {{problem}}.\n", "label.md")


def test_single_braces_stay_literal() -> None:
    text = load_template("label").render({"problem": "Compute $\\frac{1}{2}+1$."})
    assert "\\boxed{}" in text
    assert "$\\frac{1}{2}+1$" in text


def test_prompt_dir_replaces_the_shipped_template(tmp_path: Path) -> None:
    (tmp_path / "label.md").write_text("---\nplaceholders: [problem]\n---\nAnswer this: {{problem}}\n")
    template = load_template("label", tmp_path)
    assert template.render({"problem": "Compute 1+2."}) == "Answer this: Compute 1+2.\n"
    assert template.digest != load_template("label").digest


def test_prompt_dir_without_the_template_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="rate.md: prompt template not found"):
        load_template("rate", tmp_path)


def test_generation_and_judge_prompts_ask_for_the_same_properties() -> None:
    generate = load_template("generate").body.lower()
    rate = load_template("rate").body.lower()
    for criterion in ("standalone", "single question", "multiple-choice", "true/false", "proof", "answer",
                      "well-posed"):
        assert criterion in generate and criterion in rate
    assert "### problem" in generate
    assert "verdict:" in rate


def test_a_world_replaces_the_templates_it_has_and_keeps_the_shipped_others() -> None:
    label = load_template("label", world="wordsums")
    assert label.source == str(WORLD.prompt_dir / "label.md")
    assert "Result: <the number, in words>" in label.render({"problem": "What is one plus one?"})
    assert load_template("rate", world="wordsums").digest == load_template("rate").digest
    assert all(load_template(name, world="arith") == load_template(name) for name in TEMPLATE_NAMES)


def test_prompt_dir_wins_over_the_worlds_template(tmp_path: Path) -> None:
    (tmp_path / "label.md").write_text("---\nplaceholders: [problem]\n---\nMine: {{problem}}\n")
    assert load_template("label", tmp_path, "wordsums").render({"problem": "x"}) == "Mine: x\n"
