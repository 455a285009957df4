import pytest
from typer.testing import CliRunner

from sws.cli import app
from sws.worlds.arith import CATEGORIES, category_accuracy, generate_problems
from sws.worlds.arith.evaluation import accuracy_by
from sws.worlds.arith.policy import build_policy


def test_accuracy_by_groups_share_solved():
    problems = generate_problems(12, seed=0)
    graded = [(problem, index % 2 == 0) for index, problem in enumerate(problems)]
    by_category = accuracy_by(graded, "category")
    assert set(by_category) == {(category,) for category in CATEGORIES}
    assert sum(by_category.values()) / len(by_category) == 0.5
    assert accuracy_by(graded, "category", "level")[("addition", "easy")] == 1.0


@pytest.mark.slow
def test_an_untrained_policy_solves_almost_nothing(tmp_path):
    folder = build_policy(tmp_path / "random", seed=0)
    accuracy = category_accuracy(folder, n_per_category=6, seed=1)
    assert list(accuracy) == list(CATEGORIES)
    assert all(value <= 0.34 for value in accuracy.values())


@pytest.mark.slow
def test_accuracy_command_prints_a_row_per_category(tmp_path):
    folder = build_policy(tmp_path / "random", seed=0)
    result = CliRunner().invoke(app, ["world", "accuracy", "--model", str(folder), "--n-per-category", "3"])
    assert result.exit_code == 0, result.output
    for category in CATEGORIES:
        assert category in result.stdout
