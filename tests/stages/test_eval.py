import json
import statistics
from pathlib import Path

import polars as pl
import pytest
from _synthesis_run import ScriptedEngine, fake_checkpoint, use_engines, write_evaluable_run
from word_world import seed_rows, true_answer

from sws import runner
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.manifests import read_manifest
from sws.run_dir import RunDir
from sws.stages import eval as eval_stage
from sws.tables import read_table, write_table
from sws.worlds.arith import generate_problems
from sws.worlds.arith.settings import ArithSettings

N_PER_CATEGORY = 3


@pytest.fixture(autouse=True)
def empty_policy_cache(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """No bootstrap policy in the cache, so `start` is left out unless a test builds one."""
    monkeypatch.setenv("SWS_CACHE", str(tmp_path_factory.mktemp("sws_cache")))


def oracle_policy_config(**noise: float) -> PipelineConfig:
    """The arith oracle in the policy's seat: it answers `answer` requests right unless told to err."""
    return PipelineConfig.model_validate({
        "arith": {"n_eval_per_category": N_PER_CATEGORY},
        "roles": {"policy": {"engine": "oracle", "model": "", "options": noise}},
        "eval": {"k": 2, "benchmarks": ["arith"]},
    })


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    write_evaluable_run(tmp_path)
    return tmp_path


def test_a_policy_that_is_always_right_solves_every_weak_problem(run_dir: Path) -> None:
    runner.run(eval_stage.STAGE, oracle_policy_config(), run_dir)
    summary = json.loads(RunDir(run_dir).summary.read_text())
    for name in ("initial", "baseline", "augmented"):
        assert summary[f"weak_solved_{name}"] == {"overall": 1.0,
                                                   "per_category": {"precedence": 1.0, "remainders": 1.0}}
    assert summary["n_weak"] == 8
    benchmarks = read_table(run_dir, "eval/benchmarks")
    assert set(benchmarks["eval_set"]) == {"arith", "seed"}
    assert benchmarks["pass1"].to_list() == [1.0] * benchmarks.height
    assert benchmarks["avg_k"].to_list() == [1.0] * benchmarks.height
    heldout = benchmarks.filter((pl.col("eval_set") == "arith") & (pl.col("category") != "overall"))
    assert heldout["n"].to_list() == [N_PER_CATEGORY] * 9


def test_a_policy_that_is_always_wrong_solves_none(run_dir: Path) -> None:
    runner.run(eval_stage.STAGE, oracle_policy_config(labeler_error=1.0), run_dir)
    weakness = read_table(run_dir, "eval/weakness")
    assert weakness["solved"].to_list() == [0.0] * weakness.height
    assert weakness.filter(pl.col("category") == "overall")["n_weak"].to_list() == [8, 8, 8]
    assert read_table(run_dir, "eval/benchmarks")["avg_k"].sum() == 0.0


def test_shares_are_over_graded_answers_and_the_summary_counts_the_ungraded(
    run_dir: Path, monkeypatch: pytest.MonkeyPatch, slow_to_grade: str,
) -> None:
    problems = read_table(run_dir, "problems")
    answers = dict(problems.select("problem", "answer").iter_rows())
    slow_problem = problems["problem"][1]  # weak

    def respond(request, index: int) -> str:
        problem = request.fields["problem"]
        greedy = request.temperature == 0
        slow = problem == slow_problem and (greedy or index == 0)
        return f"\\boxed{{{slow_to_grade if slow else answers[problem]}}}"

    use_engines(monkeypatch, {str(RunDir(run_dir).checkpoint("initial")): ScriptedEngine(respond)})
    cfg = PipelineConfig.model_validate({
        "roles": {"policy": {"engine": "oracle", "model": ""}},
        "eval": {"k": 2, "weak_k": 2, "benchmarks": [], "seed_set": False, "checkpoints": ["initial"]},
        "grading": {"workers": 1, "deadline_s": 0.5},
    })

    runner.run(eval_stage.STAGE, cfg, run_dir)

    summary = json.loads(RunDir(run_dir).summary.read_text())
    assert summary["weak_solved_initial"]["overall"] == 1.0  # 7 of the 7 graded, not 7 of 8
    assert summary["ungraded"] == {"initial": 2} and summary["n_weak"] == 8
    per_problem = read_table(run_dir, "eval/problems").filter(pl.col("problem_id") == "p1")
    assert per_problem.select("greedy_correct", "n", "n_correct").rows() == [(None, 1, 1)]
    assert read_manifest(run_dir, "eval-initial")["info"]["ungraded"] == 2


def test_only_present_checkpoints_are_evaluated_in_training_order(tmp_path: Path, run_dir: Path) -> None:
    import shutil

    shutil.rmtree(RunDir(run_dir).checkpoint("baseline"))
    runner.run(eval_stage.STAGE, oracle_policy_config(), run_dir)
    summary = json.loads(RunDir(run_dir).summary.read_text())
    assert {key for key in summary if key.startswith("weak_solved_")} == {
        "weak_solved_initial", "weak_solved_augmented"}
    order = read_table(run_dir, "eval/weakness")["checkpoint"].unique(maintain_order=True).to_list()
    assert order == ["initial", "augmented"]


def test_retraining_one_checkpoint_re_evaluates_only_that_one(run_dir: Path) -> None:
    cfg = oracle_policy_config()
    runner.run(eval_stage.STAGE, cfg, run_dir)
    before = {name: read_manifest(run_dir, f"eval-{name}")["inputs"] for name in ("initial", "augmented")}
    assert runner.run(eval_stage.STAGE, cfg, run_dir).skipped
    (RunDir(run_dir).checkpoint("augmented") / "model.safetensors").write_text("new weights")
    runner.run(eval_stage.STAGE, cfg, run_dir)
    after = {name: read_manifest(run_dir, f"eval-{name}")["inputs"] for name in ("initial", "augmented")}
    assert after["initial"] == before["initial"]
    assert after["augmented"] != before["augmented"]


def test_no_checkpoint_is_a_user_error(tmp_path: Path, run_dir: Path) -> None:
    import shutil

    shutil.rmtree(run_dir / "train")
    with pytest.raises(UserError, match="sws train initial"):
        runner.run(eval_stage.STAGE, oracle_policy_config(), run_dir)
    assert not (run_dir / "eval" / "parts").exists() and not RunDir(run_dir).summary.exists()
    assert read_table(run_dir, "eval/sets")["eval_set"].unique(maintain_order=True).to_list() == ["arith", "weak",
                                                                                                  "seed"]


def test_weakness_table_counts_per_category_and_overall() -> None:
    per_problem = pl.DataFrame({
        "checkpoint": ["initial"] * 4, "eval_set": ["weak", "weak", "weak", "seed"],
        "problem_id": ["a", "b", "c", "a"], "category": ["x", "x", "y", "x"],
        "greedy_correct": [True, False, True, False], "n": [2] * 4, "n_correct": [1] * 4})
    table = eval_stage.weakness_table(per_problem)
    assert table.select("category", "n_weak", "n_solved", "solved").rows() == [
        ("x", 2, 1, 0.5), ("y", 1, 1, 1.0), ("overall", 3, 2, 2 / 3)]


@pytest.mark.slow
def test_a_real_tiny_policy_is_sampled_through_the_hf_engine(run_dir: Path) -> None:
    from sws.worlds.arith.policy import build_policy

    for name in ("initial", "baseline", "augmented"):
        folder = RunDir(run_dir).checkpoint(name)
        (folder / "config.json").unlink()
        build_policy(folder, seed=0)
    cfg = PipelineConfig.model_validate({"arith": {"n_eval_per_category": 2}, "eval": {"k": 2, "max_tokens": 8},
                                         "roles": {"policy": {"engine": "hf", "model": ""}}})
    runner.run(eval_stage.STAGE, cfg, run_dir)
    per_problem = read_table(run_dir, "eval/problems")
    assert per_problem.height == 3 * (6 + 8 + 12)
    summary = json.loads(RunDir(run_dir).summary.read_text())
    assert all(0.0 <= summary[f"weak_solved_{name}"]["overall"] <= 1.0 for name in ("initial", "augmented"))


def test_arith_weak_problems_get_fresh_problems_of_their_families_in_turn(run_dir: Path) -> None:
    problems = read_table(run_dir, "problems")
    families = [p.family for p in generate_problems(12, seed=0, categories=["addition", "remainders", "precedence"])]
    write_table(run_dir, "problems", problems.with_columns(pl.Series("family", families)))
    cfg = oracle_policy_config().model_copy(update={"world_settings": ArithSettings(n_weak_like=20)})

    runner.run(eval_stage.STAGE, cfg, run_dir)

    per_problem = read_table(run_dir, "eval/problems").filter(pl.col("checkpoint") == "initial")
    like = per_problem.filter(pl.col("eval_set") == "weak_like")
    weak = per_problem.filter(pl.col("eval_set") == "weak")
    assert like.height == 20 and like["problem"].n_unique() == 20
    weak_category = dict(weak.select("problem_id", "category").iter_rows())
    drawn_for = like["problem_id"].str.extract(r"^like-\d+-(.+)$")
    assert [weak_category[problem_id] for problem_id in drawn_for] == like["category"].to_list()
    assert sorted(drawn_for.value_counts()["count"].unique()) == [2, 3]  # 8 weak problems in turn: 20 = 4·3 + 4·2
    summary = json.loads(RunDir(run_dir).summary.read_text())
    assert summary["weak_like_solved_augmented"] == {"overall": 1.0,
                                                     "per_category": {"precedence": 1.0, "remainders": 1.0}}
    assert summary["held_out"]["weak_like"] == {"n": 20, "overlap": 0}


def benchmark_file(path: Path, problems: list[tuple[str, str]]) -> Path:
    path.write_text("".join(json.dumps({"question": problem, "answer": answer}) + "\n" for problem, answer in problems))
    return path


def config_with(benchmarks: list, **eval_settings) -> PipelineConfig:
    data = oracle_policy_config().model_dump(mode="json")
    return PipelineConfig.model_validate({**data, "eval": {**data["eval"], "benchmarks": benchmarks, **eval_settings}})


def test_a_benchmark_file_with_its_own_k_is_summarised_with_the_average(tmp_path: Path, run_dir: Path) -> None:
    fresh = [(p.problem, p.answer) for p in generate_problems(4, seed=99, categories=["addition"])]
    path = benchmark_file(tmp_path / "fresh.jsonl", fresh)
    cfg = config_with(["arith", {"name": "fresh", "file": str(path), "k": 3}])

    runner.run(eval_stage.STAGE, cfg, run_dir)

    summary = json.loads(RunDir(run_dir).summary.read_text())
    augmented = summary["benchmarks"]["augmented"]
    assert augmented["fresh"] == {"n": 4, "k": 3, "pass1": 1.0, "avg_k": 1.0}
    assert augmented["arith"]["k"] == 2 and augmented["average"] == {"pass1": 1.0, "avg_k": 1.0}
    assert summary["held_out"]["fresh"] == {"n": 4, "overlap": 0}
    per_problem = read_table(run_dir, "eval/problems")
    rows = per_problem.filter(pl.col("eval_set") == "fresh")
    assert set(rows["k"]) == {3} and set(rows["n"]) == {3}
    assert sorted(rows.filter(pl.col("checkpoint") == "initial")["problem"]) == sorted(p for p, _ in fresh)
    assert set(per_problem.filter(pl.col("eval_set") == "arith")["k"]) == {2}


def test_held_out_sets_replace_every_problem_a_checkpoint_trained_on(run_dir: Path) -> None:
    from sws.world import get_world

    cfg = oracle_policy_config()
    seed = read_table(run_dir, "problems")
    drawn = get_world("arith").heldout_set("arith", cfg, seed)
    trained = drawn.head(2).with_columns(pl.lit("syn/test").alias("source"), pl.Series("problem_id", ["s1", "s2"]))
    write_table(run_dir, "augmented", pl.concat([seed, trained.select(seed.columns)]))

    runner.run(eval_stage.STAGE, cfg, run_dir)

    evaluated = read_table(run_dir, "eval/problems").filter(pl.col("eval_set") == "arith")
    assert not set(trained["problem"]) & set(evaluated["problem"])
    summary = json.loads(RunDir(run_dir).summary.read_text())
    assert summary["held_out"]["arith"] == {"n": drawn.height, "overlap": 0}  # fresh problems replace them


def test_a_benchmark_sharing_a_seed_problem_is_refused_before_a_missing_checkpoint(tmp_path: Path,
                                                                                   run_dir: Path) -> None:
    import shutil

    seed = read_table(run_dir, "problems")
    path = benchmark_file(tmp_path / "leaky.jsonl", [(seed["problem"][3], seed["answer"][3]), ("What is 2+40?", "42")])
    shutil.rmtree(run_dir / "train")
    with pytest.raises(UserError, match="benchmark 'leaky' shares 1 of its 2 problems with the run's training sets "
                                        r"\(1 in problems\)"):
        runner.run(eval_stage.STAGE, config_with([{"name": "leaky", "file": str(path)}]), run_dir)
    assert not (run_dir / "eval").exists()


def test_the_math_training_split_is_never_a_benchmark_and_the_cli_says_so_in_one_line(run_dir: Path) -> None:
    import shutil

    from typer.testing import CliRunner

    from sws.cli import app
    from sws.config import save_run_config

    shutil.rmtree(run_dir / "train")
    with pytest.raises(UserError, match="'math', the MATH training split"):
        runner.run(eval_stage.STAGE, config_with(["math"]), run_dir)
    save_run_config(run_dir, config_with(["math"]))
    result = CliRunner().invoke(app, ["eval", "--run", str(run_dir)])
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "'math'" in lines[0]


def test_base_is_the_init_model_and_gets_its_own_row(run_dir: Path) -> None:
    cfg = config_with(["arith"], checkpoints=["base", "initial"])
    cfg = cfg.model_copy(update={"train": cfg.train.model_copy(
        update={"init_model": str(RunDir(run_dir).checkpoint("initial"))})})

    runner.run(eval_stage.STAGE, cfg, run_dir)

    summary = json.loads(RunDir(run_dir).summary.read_text())
    assert list(summary["benchmarks"]) == ["base", "initial"]
    assert summary["benchmarks"]["base"]["average"] == {"pass1": 1.0, "avg_k": 1.0}


def test_standard_errors_are_over_problems_and_paired_for_the_difference() -> None:
    def rows(checkpoint: str, greedy: list[bool], right: list[int]) -> pl.DataFrame:
        return pl.DataFrame({"checkpoint": checkpoint, "eval_set": "weak", "problem_id": [f"p{i}" for i in range(4)],
                             "greedy_correct": greedy, "n": [4] * 4, "n_correct": right})

    per_problem = pl.concat([rows("baseline", [True, False, False, True], [4, 0, 1, 3]),
                             rows("augmented", [True, True, False, True], [4, 1, 2, 4])])

    errors = eval_stage.standard_errors(per_problem, ["baseline", "augmented"])["standard_errors"]["weak"]

    assert errors["baseline"]["pass1"] == pytest.approx(statistics.stdev([1, 0, 0, 1]) / 2)
    assert errors["baseline"]["avg_k"] == pytest.approx(statistics.stdev([1, 0, 0.25, 0.75]) / 2)
    # augmented − baseline per problem: greedy 0, 1, 0, 0 and sampled 0, .25, .25, .25
    assert errors[eval_stage.DIFFERENCE]["pass1"] == pytest.approx(statistics.stdev([0, 1, 0, 0]) / 2)
    assert errors[eval_stage.DIFFERENCE]["avg_k"] == pytest.approx(statistics.stdev([0, 0.25, 0.25, 0.25]) / 2)
    assert "weak_like" not in eval_stage.standard_errors(per_problem, ["baseline"])["standard_errors"]


def write_word_run(run_dir: Path) -> pl.DataFrame:
    """Six seed problems of the word world, the subtraction ones weak, and an initial checkpoint."""
    rows = seed_rows(3)
    problems = pl.DataFrame({"problem_id": [row["id"] for row in rows], "problem": [row["problem"] for row in rows],
                             "answer": [row["answer"] for row in rows], "category": [row["category"] for row in rows],
                             "source": ["seed"] * len(rows)})
    write_table(run_dir, "problems", problems)
    weak = [category == "subtraction" for category in problems["category"]]
    write_table(run_dir, "weakness", pl.DataFrame({
        "problem_id": problems["problem_id"], "category": problems["category"], "accs": [[0.0]] * len(rows),
        "n_record": [1] * len(rows), "max_acc": [0.0] * len(rows), "slope": [0.0] * len(rows), "weak": weak}))
    fake_checkpoint(run_dir, "initial")
    return problems


def test_a_worlds_verifier_grades_every_eval_set_and_its_held_out_set_is_drawn(tmp_path: Path,
                                                                             verifier_calls) -> None:
    problems = write_word_run(tmp_path)
    # The world's rules as the policy: always right, every other sample written as "Twenty Four".
    cfg = PipelineConfig.model_validate({
        "world": "wordsums", "roles": {"policy": {"engine": "wordsums", "model": ""}},
        "eval": {"k": 2, "weak_k": 2, "benchmarks": ["wordsums"], "checkpoints": ["initial"]}})

    runner.run(eval_stage.STAGE, cfg, tmp_path)

    benchmarks = read_table(tmp_path, "eval/benchmarks")
    assert set(benchmarks["eval_set"]) == {"wordsums", "seed"}
    assert benchmarks["pass1"].to_list() == [1.0] * benchmarks.height  # math-verify: half the samples wrong
    assert benchmarks["avg_k"].to_list() == [1.0] * benchmarks.height
    summary = json.loads(RunDir(tmp_path).summary.read_text())
    assert summary["weak_solved_initial"]["overall"] == 1.0 and summary["n_weak"] == 3
    heldout = read_table(tmp_path, "eval/problems").filter(pl.col("eval_set") == "wordsums")
    assert heldout.height == 8 and not set(heldout["problem"]) & set(problems["problem"])
    references = {call[1] for call in verifier_calls() if call[0] == "equivalent"}
    assert set(problems["answer"]) | {true_answer(problem) for problem in heldout["problem"]} <= references
