from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from _synthesis_run import ScriptedEngine, noisy_oracle_config, scripted_role, use_engines
from word_world import WordEngine, canonical, problem_text

from sws import runner
from sws.config import PipelineConfig
from sws.consistency import TIED
from sws.errors import UserError
from sws.stages import label
from sws.tables import read_parquet, read_table, rejected_path, table_path, write_table
from sws.worlds.arith import generate_problems, solve

NO_ANSWER = "I am not sure how to finish this."


def write_rated(run_dir: Path, problems: list[str]) -> None:
    n = len(problems)
    write_table(run_dir, "rated", pl.DataFrame({
        "syn_id": [f"syn-{index}" for index in range(n)], "category": ["arith"] * n,
        "concepts": [["arithmetic"]] * n, "level": ["medium"] * n, "problem": problems,
        "verdicts": ['{"0:oracle/judge": ["perfect"]}'] * n,
    }, schema={"syn_id": pl.Utf8, "category": pl.Utf8, "concepts": pl.List(pl.Utf8), "level": pl.Utf8,
               "problem": pl.Utf8, "verdicts": pl.Utf8}))


def scripted(samples_by_problem: dict[str, list[str]]) -> ScriptedEngine:
    return ScriptedEngine(lambda request, k: samples_by_problem[request.fields["problem"]][k])


def boxed(answer: str) -> str:
    return f"Step by step.\nSo the result is $\\boxed{{{answer}}}$."


def labeler_config(samples: int = 8, **synthesize: object) -> PipelineConfig:
    config = PipelineConfig()
    config.roles.labeler = scripted_role("labeler")
    config.synthesize.label_samples = samples
    for name, value in synthesize.items():
        setattr(config.synthesize, name, value)
    return config


def test_answers_are_grouped_by_equivalence_and_unparsed_ones_never_win(tmp_path: Path, monkeypatch) -> None:
    samples = {
        "half": [boxed("0.5"), boxed("\\frac{1}{2}"), boxed("1/2"), boxed("\\frac{1}{2}"), boxed("\\frac12"),
                 boxed("3"), NO_ANSWER, NO_ANSWER],
        "mostly unparsed": [NO_ANSWER] * 5 + [boxed("7")] * 3,
        "nothing": [NO_ANSWER] * 8,
        "split": [boxed("4")] * 4 + [boxed("5")] * 4,
        "half ahead": [boxed("4")] * 4 + [boxed("5")] * 3 + [NO_ANSWER],
    }
    write_rated(tmp_path, list(samples))
    engine = scripted(samples)
    use_engines(monkeypatch, {"labeler": engine})
    result = runner.run(label.STAGE, labeler_config(), tmp_path)
    kept = read_table(tmp_path, "labeled")
    rejected = read_parquet(rejected_path(tmp_path, "labeled"))
    assert kept["problem"].to_list() == ["half", "half ahead"]
    half = kept.row(0, named=True)
    assert half["answer"] == "\\frac{1}{2}" and half["consistency"] == 5 / 8
    assert half["answers"][-2:] == [None, None] and half["answers"][0] == "0.5"
    assert kept.row(1, named=True)["consistency"] == 0.5  # exactly 50 % with no group as large is kept
    assert dict(zip(rejected["problem"], rejected["reject_reason"], strict=True)) == {
        "mostly unparsed": "low_consistency", "nothing": "no_answer", "split": TIED,
    }
    assert result.info["funnel"]["kept"] == 2
    request = engine.requests[0]
    assert request.task == "label" and request.n == 8 and request.fields == {"problem": "half"}
    assert "half" in request.messages[0]["content"]


def student_config(tmp_path: Path) -> PipelineConfig:
    config = labeler_config(weak_to_strong=True, student_samples=8)
    config.roles.policy = scripted_role("student")
    return config


def test_weak_to_strong_requires_teacher_majority_and_student_agreement(tmp_path: Path, monkeypatch) -> None:
    teacher = {
        "agreed": [boxed("12")] * 6 + [boxed("13")] * 2,
        "student lost": [boxed("20")] * 6 + [boxed("21")] * 2,
        "tie": [boxed("4")] * 4 + [boxed("5")] * 4,
    }
    student = {
        "agreed": [boxed("12")] * 2 + [boxed("11")] * 6,  # 25 %: enough
        "student lost": [boxed("20")] + [NO_ANSWER] * 7,  # 12.5 %: not enough
    }
    write_rated(tmp_path, list(teacher))
    student_engine = ScriptedEngine(lambda request, k: student[request.fields["problem"]][k])
    use_engines(monkeypatch, {"labeler": scripted(teacher), "student": student_engine})
    runner.run(label.STAGE, student_config(tmp_path), tmp_path)
    kept = read_table(tmp_path, "labeled")
    rejected = read_parquet(rejected_path(tmp_path, "labeled"))
    assert kept["problem"].to_list() == ["agreed"]
    assert kept["student_agreement"].to_list() == [0.25]
    assert dict(zip(rejected["problem"], rejected["reject_reason"], strict=True)) == {
        "student lost": "student_disagrees", "tie": TIED,
    }
    # the student is asked as in training: the arith tiny policy reads raw text, and only about kept problems
    assert [request.prompt for request in student_engine.requests] == ["agreed\n", "student lost\n"]
    assert all(request.messages is None and request.n == 8 for request in student_engine.requests)


def test_student_agreement_is_over_its_graded_samples_and_none_graded_is_rejected_as_ungraded(
    tmp_path: Path, monkeypatch, slow_to_grade: str,
) -> None:
    teacher = {"graded once": [boxed("12")] * 8, "never graded": [boxed("20")] * 8}
    student = {"graded once": [boxed(slow_to_grade), boxed("12")], "never graded": [boxed(slow_to_grade)] * 2}
    write_rated(tmp_path, list(teacher))
    use_engines(monkeypatch, {"labeler": scripted(teacher), "student": scripted(student)})
    config = student_config(tmp_path)
    config.synthesize.student_samples = 2
    config.grading.workers, config.grading.deadline_s = 1, 0.5

    runner.run(label.STAGE, config, tmp_path)

    kept = read_table(tmp_path, "labeled")
    assert kept.select("problem", "student_agreement").rows() == [("graded once", 1.0)]
    rejected = read_parquet(rejected_path(tmp_path, "labeled"))
    assert rejected.select("problem", "reject_reason").rows() == [("never graded", "ungraded")]


def test_weak_to_strong_without_an_initial_checkpoint_names_the_command(tmp_path: Path) -> None:
    write_rated(tmp_path, ["Compute 1+2."])
    config = labeler_config(weak_to_strong=True)
    with pytest.raises(UserError, match="sws train initial"):
        runner.run(label.STAGE, config, tmp_path)
    assert not table_path(tmp_path, "labeled").exists()


def test_noisy_oracle_labels_are_mostly_right(tmp_path: Path) -> None:
    problems = [problem.problem for problem in generate_problems(30, seed=5)]
    write_rated(tmp_path, problems)
    runner.run(label.STAGE, noisy_oracle_config(labeler_error=0.3), tmp_path)
    kept = read_table(tmp_path, "labeled")
    assert kept.height >= 20
    right = sum(answer == solve(problem).answer for problem, answer in zip(kept["problem"], kept["answer"], strict=True))
    assert right / kept.height >= 0.95


def test_empty_rated_gives_empty_labeled(tmp_path: Path) -> None:
    write_rated(tmp_path, [])
    result = runner.run(label.STAGE, PipelineConfig(), tmp_path)
    assert read_table(tmp_path, "labeled").height == 0
    assert result.info["funnel"]["in"] == 0


def test_cut_off_samples_count_as_no_answer(tmp_path: Path, monkeypatch) -> None:
    from sws.engines import Completion

    class CutOffLabeler(ScriptedEngine):
        def generate(self, requests):
            self.requests.extend(requests)
            # An intermediate box in a cut-off solution is no final answer.
            return [[Completion(boxed("455"), 512, "length")] * 3 + [Completion(boxed("498"), 80)] for _ in requests]

    write_rated(tmp_path, ["Compute 6*83."])
    use_engines(monkeypatch, {"labeler": CutOffLabeler(lambda request, k: "")})
    result = runner.run(label.STAGE, labeler_config(samples=4), tmp_path)
    rejected = read_parquet(rejected_path(tmp_path, "labeled")).row(0, named=True)
    assert rejected["answers"] == [None, None, None, "498"] and rejected["reject_reason"] == "low_consistency"
    assert result.info["funnel"]["truncated"] == 3


def test_the_labeler_never_sees_a_solution_left_in_the_problem(tmp_path: Path, monkeypatch) -> None:
    leaked = "Compute 6*83.\n\n---\n\nTo solve this problem, we multiply: 6*83 = 407.\n\n\\[\\boxed{407}\\]"
    write_rated(tmp_path, [leaked])
    engine = ScriptedEngine(lambda request, k: boxed("498"))
    use_engines(monkeypatch, {"labeler": engine})
    runner.run(label.STAGE, labeler_config(samples=4), tmp_path)
    assert engine.requests[0].fields == {"problem": "Compute 6*83."}
    assert "407" not in engine.requests[0].messages[0]["content"]
    assert read_table(tmp_path, "labeled")["answer"].to_list() == ["498"]


def test_a_label_that_copies_the_solution_in_the_problem_is_rejected(tmp_path: Path, monkeypatch) -> None:
    leaked = "Compute 6*83.\n\n### Solution\n6*83 = 407, so the answer is \\boxed{407}."
    write_rated(tmp_path, [leaked, "Compute 7*8."])
    use_engines(monkeypatch, {"labeler": ScriptedEngine(lambda request, k: boxed("407") if "6*83" in
                                                        request.fields["problem"] else boxed("56"))})
    runner.run(label.STAGE, labeler_config(samples=4), tmp_path)
    rejected = read_parquet(rejected_path(tmp_path, "labeled"))
    assert rejected.select("problem", "reject_reason").rows() == [(leaked, "copied_solution")]
    assert read_table(tmp_path, "labeled")["answer"].to_list() == ["56"]


def test_answers_or_problems_with_control_characters_never_reach_the_labeled_set(tmp_path: Path, monkeypatch):
    samples = {"plain": [boxed("4")] * 8, "escaped answer": [boxed("4\x1b[2J")] * 8,
               "bell \x07 in the problem": [boxed("4")] * 8, "flipped \u202e problem": [boxed("4")] * 8}
    write_rated(tmp_path, list(samples))
    use_engines(monkeypatch, {"labeler": scripted(samples)})
    runner.run(label.STAGE, labeler_config(), tmp_path)
    assert read_table(tmp_path, "labeled")["problem"].to_list() == ["plain"]
    rejected = read_parquet(rejected_path(tmp_path, "labeled"))
    assert set(rejected["reject_reason"]) == {"control_characters"} and rejected.height == 3


@pytest.mark.parametrize(("top", "drawn", "settled"), [
    (4, 4, False),  # 4 of 8 agree: a tie with 4 others could still come
    (5, 5, True),  # a strict majority of all 8 meets 0.5: no other group can tie it
    (1, 6, True),  # 1 + 2 left can no longer reach 4 of 8
    (2, 6, False),  # 2 + 2 left still can
    (3, 8, True),  # all drawn
])
def test_a_problem_is_settled_when_no_further_sample_can_change_its_decision(top, drawn, settled) -> None:
    assert label.label_settled(top, drawn, 8, 0.5, weak_to_strong=False) is settled


def test_weak_to_strong_needs_more_than_half_to_settle_a_keep() -> None:
    assert not label.label_settled(4, 6, 8, 0.5, weak_to_strong=True)
    assert label.label_settled(2, 6, 8, 0.5, weak_to_strong=True)  # 2 + 2 = 4 of 8 is not more than half


def test_labeling_in_waves_keeps_the_problems_and_labels_of_drawing_every_sample(tmp_path: Path) -> None:
    problems = [problem.problem for problem in generate_problems(40, seed=5)]
    runs = {}
    for wave in (8, 3, 1):
        run = tmp_path / f"wave-{wave}"
        write_rated(run, problems)
        config = noisy_oracle_config(labeler_error=0.3)
        config.synthesize.label_wave = wave
        result = runner.run(label.STAGE, config, run)
        runs[wave] = (read_table(run, "labeled").select("syn_id", "answer").rows(), result.info["funnel"])
    full, full_funnel = runs[8]
    assert len(full) > 20 and full_funnel["completions"] == 8 * 40
    for wave in (3, 1):
        kept, funnel = runs[wave]
        assert kept == full
        assert funnel["completions"] < full_funnel["completions"]
    assert runs[1][1]["completions"] < runs[3][1]["completions"]


def test_a_worlds_verifier_extracts_and_groups_the_labels_the_worlds_prompt_asks_for(
    tmp_path: Path, monkeypatch, verifier_calls,
) -> None:
    problems = [problem_text("addition", 20, 4), problem_text("subtraction", 30, 9)]
    write_rated(tmp_path, problems)
    rules = WordEngine(scripted_role("rules"))
    labeler = ScriptedEngine(rules.answer)
    use_engines(monkeypatch, {"rules": labeler})
    # The world's labeler states every other sample as "Twenty Four": math-verify would split them in two.
    config = PipelineConfig.model_validate({"world": "wordsums", "synthesize": {"label_samples": 4,
                                                                               "min_consistency": 0.75}})

    runner.run(label.STAGE, config, tmp_path)

    labeled = read_table(tmp_path, "labeled")
    assert [canonical(answer) for answer in labeled["answer"]] == ["twenty four", "twenty one"]
    assert labeled["consistency"].to_list() == [1.0, 1.0]
    assert sorted(labeled["answers"][0].to_list()) == ["Twenty Four", "Twenty Four", "twenty-four", "twenty-four"]
    calls = verifier_calls()
    assert {tuple(sorted(call[1:])) for call in calls if call[0] == "equivalent"} == {
        ("Twenty Four", "twenty-four"), ("Twenty One", "twenty-one")}
    assert sum(call[0] == "extract" for call in calls) == 8
    assert all("Result: <the number, in words>" in request.messages[0]["content"] for request in labeler.requests)
