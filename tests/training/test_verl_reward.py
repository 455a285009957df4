import importlib.util
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from word_world import WordVerifier, shorter_is_better

from sws.grading import DEFAULT_DEADLINE_S
from sws.references import name_of
from sws.training import verl_reward
from sws.training.rewards import correct
from sws.training.verl_launch import reward_module_source
from sws.training.verl_reward import VerlReward
from sws.worlds.math.verifier import MathVerifier

VERL_PYTHON = Path(__file__).parents[2] / ".venv-verl" / "bin" / "python"
MATH, CORRECT = name_of(MathVerifier), name_of(correct)
compute_score = VerlReward(MATH, CORRECT)


def load_generated_reward(tmp_path: Path, verifier: str = MATH, reward: str = CORRECT):
    """The `reward.py` sws writes for verl, loaded from its file as verl's `load_extern_object` does."""
    path = tmp_path / "reward.py"
    path.write_text(reward_module_source(verifier, reward))
    spec = importlib.util.spec_from_file_location("custom_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.compute_score


def test_a_correct_response_scores_one_and_names_its_problem():
    result = compute_score("arith", "7*6 = 42, so \\boxed{42}", "42", {"problem_id": "p-17", "index": 3})

    assert result == {"score": 1.0, "acc": True, "graded": True, "problem_id": "p-17"}


def test_a_wrong_or_unanswered_response_scores_zero():
    assert compute_score("arith", "\\boxed{41}", "42")["score"] == 0.0
    assert compute_score("math", "I am not sure.", "\\frac{1}{2}", None) == {
        "score": 0.0, "acc": False, "graded": True, "problem_id": "",
    }


def test_a_response_graded_past_the_deadline_scores_zero_and_says_it_is_ungraded(
    monkeypatch, impatient_pool, slow_to_grade,
):
    monkeypatch.setattr(verl_reward, "shared_pool", lambda *_: impatient_pool)

    assert compute_score("math", f"\\boxed{{{slow_to_grade}}}", "2", {"problem_id": "p"}) == {
        "score": 0.0, "acc": False, "graded": False, "problem_id": "p",
    }


def test_called_from_threads_it_grades_math_answers_and_meets_its_deadline_on_hostile_ones(tmp_path):
    score = load_generated_reward(tmp_path)
    cases = [  # (solution, ground truth, correct)
        ("so the answer is $\\boxed{\\frac{1}{2}}$", "0.5", True),
        ("Hence \\boxed{\\sqrt{3}}.", "\\sqrt{3}", True),
        ("\\boxed{\\dfrac{\\pi}{4}}", "\\frac{\\pi}{4}", True),
        ("\\boxed{(1, 2)}", "(2, 1)", False),
        ("\\boxed{9^{9^{9^9}}}", "1", False),
        ("x" * 100_000 + " \\boxed{" + "1+" * 20_000 + "1}", "2", False),
        ("y" * 100_000, "7", False),
    ]
    score("math", "\\boxed{1}", "1")  # the grading workers start once, outside the timed part
    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=len(cases)) as threads:
        results = list(threads.map(
            lambda case: score("math", case[0], case[1], {"problem_id": f"p{cases.index(case)}"}), cases))
    elapsed = time.monotonic() - started

    assert [result["acc"] for result in results] == [correct for _, _, correct in cases]
    assert [result["problem_id"] for result in results] == [f"p{index}" for index in range(len(cases))]
    # The two hostile answers may each run into the deadline and cost a worker restart; nothing more.
    assert elapsed < 2 * (DEFAULT_DEADLINE_S + 10) + 10, elapsed


@pytest.mark.skipif(not VERL_PYTHON.is_file(), reason="needs verl's environment: run `make install-verl`")
def test_the_generated_module_imports_in_an_environment_without_sws_dependencies(tmp_path):
    (tmp_path / "reward.py").write_text(reward_module_source(MATH, CORRECT))
    script = ("import importlib.util, sys\n"
              f"spec = importlib.util.spec_from_file_location('m', {str(tmp_path / 'reward.py')!r})\n"
              "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
              "print(m.compute_score('math', 'so \\\\boxed{\\\\frac{2}{4}}', '0.5', {'problem_id': 'p'}))\n"
              "assert 'polars' not in sys.modules and 'pydantic' not in sys.modules\n")
    result = subprocess.run([str(VERL_PYTHON), "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == "{'score': 1.0, 'acc': True, 'graded': True, 'problem_id': 'p'}"


def test_the_generated_module_imports_nothing_verls_environment_lacks(tmp_path):
    (tmp_path / "reward.py").write_text(reward_module_source(MATH, CORRECT))
    source = Path(__file__).parents[2] / "src"  # this checkout's, first: an installed sws may be another's
    script = (f"import importlib.util, sys\nsys.path.insert(0, {str(source)!r})\n"
              f"spec = importlib.util.spec_from_file_location('m', {str(tmp_path / 'reward.py')!r})\n"
              "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
              "print(m.compute_score('math', 'so \\\\boxed{\\\\frac{2}{4}}', '0.5', {'problem_id': 'p'})['acc'])\n"
              "print(sorted({'polars', 'pydantic', 'torch', 'numpy', 'sws.world', 'sws.config'} & set(sys.modules)))\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.split() == ["True", "[]"]


def test_the_generated_module_grades_with_the_worlds_verifier_and_scores_with_the_runs_reward(
    tmp_path, verifier_calls,
):
    score = load_generated_reward(tmp_path, name_of(WordVerifier), name_of(shorter_is_better))

    right = score("wordsums", "Result: Twenty Four", "twenty-four", {"problem_id": "p1", "index": 0})
    wrong = score("wordsums", "Result: three", "there", {"problem_id": "p2", "index": 1})

    assert right == {"score": pytest.approx(1 - 0.19), "acc": True, "graded": True, "problem_id": "p1"}
    assert wrong == {"score": pytest.approx(-0.13), "acc": False, "graded": True, "problem_id": "p2"}
    assert [call for call in verifier_calls() if call[0] == "equivalent"] == [
        ["equivalent", "twenty-four", "Twenty Four"], ["equivalent", "there", "three"]]
