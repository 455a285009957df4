import io
import json
import shutil
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from sws import compare
from sws.atomic_files import write_json
from sws.cli import app
from sws.config import PipelineConfig, save_run_config
from sws.errors import UserError

WEAK = compare.Gap("augmented", "baseline", "weak_solved")
LIKE = compare.Gap("augmented", "baseline", "weak_like_solved")


def evaluated_run(root: Path, seed: int, baseline: float | None, augmented: float | None, like: tuple | None = None,
                  kernels: str = "AVX2", selected: float | None = None) -> Path:
    """A run's summary; `like` = (baseline, augmented[, selected]) on weak_like; `selected`: the selected arm's share
    (none: the run has no selected arm)."""
    run = root / f"run-s{seed}"
    save_run_config(run, PipelineConfig(seed=seed))
    arms = (("initial", 0.1), ("baseline", baseline), ("augmented", augmented),
            *((("selected", selected),) if selected is not None else ()))
    summary = {f"weak_solved_{name}": {"overall": share, "per_category": {}} for name, share in arms}
    if like is not None:
        summary |= {f"weak_like_solved_{name}": {"overall": share, "per_category": {}}
                    for name, share in zip(("baseline", "augmented", "selected"), like, strict=False)}
    environment = {"cpu": "AMD EPYC 7B13", "cpu_kernels": kernels, "versions": {"torch": "2.13.0", "trl": "0.29.0"}}
    write_json(run / "summary.json", {**summary, "n_weak": 100, "environment": environment})
    return run


def rendered(table, width: int = 150) -> str:
    console = Console(file=io.StringIO(), width=width)
    console.print(table)
    return console.file.getvalue()


def table_cells(text: str) -> list[list[str]]:
    return [[cell.strip() for cell in line.strip("│").split("│")] for line in text.splitlines() if line.startswith("│")]


def test_each_run_gets_its_difference_in_points_then_mean_and_spread(tmp_path: Path) -> None:
    runs = [evaluated_run(tmp_path, 0, 0.20, 0.25), evaluated_run(tmp_path, 1, 0.20, 0.21),
            evaluated_run(tmp_path, 2, 0.20, 0.17)]
    results = [compare.run_result(run) for run in runs]
    assert [result.seed for result in results] == [0, 1, 2]
    text = rendered(compare.comparison_table(results))
    assert "+5.0" in text and "+1.0" in text and "-3.0" in text
    mean_row = next(line for line in text.splitlines() if "mean" in line)
    sd_row = next(line for line in text.splitlines() if "sd" in line)
    assert "+1.0" in mean_row and "21.0%" in mean_row  # mean gap; mean augmented share
    assert "4.0" in sd_row
    assert compare.verdict(results) == ("weak problems: augmented ahead of the baseline in 2 of 3 runs; "
                                        "mean +1.0 points, sd 4.0, SEM 2.3: not above 2 SEM")


def test_a_measure_gets_its_table_only_where_eval_measured_it(tmp_path: Path) -> None:
    plain = compare.run_result(evaluated_run(tmp_path, 0, 0.2, 0.3))
    assert compare.measured([plain]) == ["weak_solved"]
    arith = compare.run_result(evaluated_run(tmp_path, 1, 0.2, 0.3, like=(0.30, 0.36)))
    assert compare.measured([plain, arith]) == ["weak_solved", "weak_like_solved"]
    text = rendered(compare.comparison_table([plain, arith], "weak_like_solved"))
    assert "weak_like, greedy" in text and "+6.0" in text


def test_the_cpu_the_runs_were_measured_on_is_named(tmp_path: Path) -> None:
    results = [compare.run_result(evaluated_run(tmp_path, seed, 0.2, 0.3)) for seed in (0, 1)]
    assert compare.machine_line(results) == "measured on: AMD EPYC 7B13, CPU kernels AVX2"


def test_five_seeds_give_mean_sem_and_the_two_sem_test_on_both_differences(tmp_path: Path) -> None:
    weak_gaps = [0.03, 0.02, 0.04, 0.01, 0.05]  # mean 3 points, sd √2.5 = 1.58, SEM 0.71: above 2 SEM
    like_gaps = [0.02, -0.01, 0.03, 0.00, 0.01]  # mean 1 point, the same SEM: not above 2 SEM
    results = [compare.run_result(evaluated_run(tmp_path, seed, 0.20, 0.20 + weak, like=(0.30, 0.30 + like)))
               for seed, (weak, like) in enumerate(zip(weak_gaps, like_gaps, strict=True))]
    found = compare.spread([result.gaps[WEAK] for result in results])
    assert found.n == 5 and found.mean == pytest.approx(0.03)
    assert found.sd == pytest.approx(2.5 ** 0.5 / 100) and found.sem == pytest.approx(2.5 ** 0.5 / 100 / 5 ** 0.5)
    assert found.above_two_sem is True
    assert compare.spread([result.gaps[LIKE] for result in results]).above_two_sem is False
    for measure, above in (("weak_solved", "yes"), ("weak_like_solved", "no")):
        rows = {cells[0]: cells[-1] for cells in table_cells(rendered(compare.comparison_table(results, measure)))}
        assert rows["sem"] == "0.7" and rows["mean > 2 sem"] == above
    assert compare.verdict(results).splitlines() == [
        "weak problems: augmented ahead of the baseline in 5 of 5 runs; mean +3.0 points, sd 1.6, SEM 0.7: "
        "above 2 SEM",
        "fresh problems of their families (weak_like): augmented ahead of the baseline in 3 of 5 runs; "
        "mean +1.0 points, sd 1.6, SEM 0.7: not above 2 SEM",
    ]


def test_a_negative_mean_is_never_above_two_sem_and_is_called_reversed_beyond_it() -> None:
    reversed_ = compare.spread([-0.05, -0.04, -0.06])
    assert reversed_.above_two_sem is False and reversed_.below_two_sem is True
    assert compare.beyond_two_sem(reversed_) == "reversed"
    assert compare.beyond_two_sem(compare.spread([-0.05, 0.04, -0.01])) == "no"
    assert compare.beyond_two_sem(compare.spread([0.05])) == "–"


def test_one_run_has_no_spread(tmp_path: Path) -> None:
    result = compare.run_result(evaluated_run(tmp_path, 0, 0.2, 0.3))
    assert compare.verdict([result]) == "weak problems: augmented ahead of the baseline in 1 of 1 runs; mean +10.0 points"
    assert "–" in next(line for line in rendered(compare.comparison_table([result])).splitlines() if "sem" in line)


def test_runs_without_weak_problems_say_so(tmp_path: Path) -> None:
    result = compare.run_result(evaluated_run(tmp_path, 0, None, None))
    assert result.gaps[WEAK] is None
    assert compare.verdict([result]) == "no run measured augmented − baseline: none had weak problems"


def test_a_run_without_a_baseline_names_the_training_to_do(tmp_path: Path) -> None:
    run = evaluated_run(tmp_path, 0, 0.2, 0.3)
    write_json(run / "summary.json", {"weak_solved_initial": {"overall": 0.1, "per_category": {}}})
    with pytest.raises(UserError, match="'weak_solved_baseline' missing; train it"):
        compare.run_result(run)


def test_a_broken_summary_names_the_rerun(tmp_path: Path) -> None:
    run = evaluated_run(tmp_path, 0, 0.2, 0.3)
    (run / "summary.json").write_text("{")
    with pytest.raises(UserError, match="not valid JSON"):
        compare.run_result(run)


def test_cli_prints_the_table_and_an_unevaluated_run_is_one_error_line(tmp_path: Path) -> None:
    runs = [str(evaluated_run(tmp_path, seed, 0.2, 0.2 + seed / 100)) for seed in (0, 1)]
    result = CliRunner().invoke(app, ["compare", *runs])
    assert result.exit_code == 0, result.output
    assert "over 2 runs" in result.output and "ahead of the baseline in 1 of 2 runs" in result.output
    missing = CliRunner().invoke(app, ["compare", runs[0], str(tmp_path / "never-evaluated")])
    assert missing.exit_code == 2
    assert missing.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'never-evaluated' / 'summary.json'}: not found; "
        f"run `sws eval --run {tmp_path / 'never-evaluated'}` first"]


def test_runs_on_other_cpu_kernels_get_a_note_and_alike_runs_none(tmp_path: Path) -> None:
    alike = [str(evaluated_run(tmp_path / "a", seed, 0.2, 0.25)) for seed in (0, 1)]
    assert "note:" not in CliRunner().invoke(app, ["compare", *alike]).output
    mixed = [alike[0], str(evaluated_run(tmp_path / "b", 2, 0.2, 0.25, kernels="AVX512"))]
    result = CliRunner().invoke(app, ["compare", *mixed])
    assert result.exit_code == 0, result.output
    assert "note: the runs differ in CPU kernels," in result.output
    assert "torch" not in result.output.split("note:")[1].split(",")[0]


@pytest.mark.parametrize("overall", [float("nan"), float("inf"), -0.1, 7.5, "0.5", True, [0.5]])
def test_a_share_that_is_no_share_is_one_error_line(tmp_path: Path, overall) -> None:
    run = evaluated_run(tmp_path, 0, 0.2, 0.3)
    summary = (run / "summary.json").read_text().replace('"overall": 0.3', f'"overall": {json.dumps(overall)}')
    (run / "summary.json").write_text(summary)
    result = CliRunner().invoke(app, ["compare", str(run), str(evaluated_run(tmp_path, 1, 0.2, 0.3))])
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert result.stderr.splitlines() == [result.stderr.strip()] and "field 'weak_solved_augmented'" in result.stderr


@pytest.mark.parametrize("environment", [[1], "avx2", {"versions": [1]}])
def test_a_mistyped_environment_is_one_error_line(tmp_path: Path, environment) -> None:
    run = evaluated_run(tmp_path, 0, 0.2, 0.3)
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "environment": environment}))
    result = CliRunner().invoke(app, ["compare", str(run), str(evaluated_run(tmp_path, 1, 0.2, 0.3))])
    assert result.exit_code == 2 and "field 'environment'" in result.stderr and len(result.stderr.splitlines()) == 1


def test_the_same_run_given_twice_is_refused(tmp_path: Path) -> None:
    run = evaluated_run(tmp_path, 0, 0.2, 0.3)
    result = CliRunner().invoke(app, ["compare", str(run), str(tmp_path / "." / run.name)])
    assert result.exit_code == 2 and "given twice" in result.stderr and len(result.stderr.splitlines()) == 1


def test_the_selected_arm_gets_its_differences_to_both_other_arms_where_runs_trained_it(tmp_path: Path) -> None:
    # selected − baseline: +2, +4, +3 points (mean +3, sd 1, SEM 0.58); augmented − selected: -1, +1, +3
    runs = [evaluated_run(tmp_path, seed, 0.20, augmented, like=(0.30, 0.32, 0.31), selected=selected)
            for seed, (augmented, selected) in enumerate([(0.21, 0.22), (0.25, 0.24), (0.26, 0.23)])]
    results = compare.run_results(runs)
    text = rendered(compare.comparison_table(results), width=250)
    assert "sel − base" in text and "aug − sel" in text and "sel: the selected arm" in text
    assert "sel − base" in rendered(compare.comparison_table(results, "weak_like_solved"), width=250)
    header = next(line for line in text.splitlines() if "run" in line and "seed" in line)
    assert [cell.strip() for cell in header.strip("┃").split("┃")][2:6] == ["initial", "baseline", "augmented",
                                                                           "selected"]
    rows = {cells[0]: cells for cells in table_cells(text)}
    assert rows["mean"][5] == "23.0%"  # the selected arm's mean share
    lines = compare.verdict(results).splitlines()
    assert ("weak problems: selected ahead of the baseline in 3 of 3 runs; mean +3.0 points, sd 1.0, SEM 0.6: "
            "above 2 SEM") in lines
    assert ("weak problems: augmented ahead of selected in 2 of 3 runs; mean +1.0 points, sd 2.0, SEM 1.2: "
            "not above 2 SEM") in lines
    assert any(line.startswith("fresh problems of their families (weak_like): augmented ahead of selected in 3 of 3 "
                               "runs; mean +1.0 points") for line in lines)


def test_runs_without_the_selected_arm_show_neither_its_column_nor_its_differences(tmp_path: Path) -> None:
    results = [compare.run_result(evaluated_run(tmp_path, seed, 0.2, 0.3)) for seed in (0, 1)]
    header = next(line for line in rendered(compare.comparison_table(results)).splitlines() if "seed" in line)
    assert [cell.strip() for cell in header.strip("┃").split("┃")][2:] == ["initial", "baseline", "augmented",
                                                                         "aug − base"]
    assert "selected" not in compare.verdict(results)


def test_the_shares_over_k_samples_get_their_own_table_and_verdict(tmp_path: Path) -> None:
    runs = []
    for seed, (baseline, augmented) in enumerate([(0.20, 0.23), (0.21, 0.23)]):
        run = evaluated_run(tmp_path, seed, 0.2, 0.2)
        summary = json.loads((run / "summary.json").read_text())
        summary |= {f"weak_avg_k_{name}": {"overall": share, "per_category": {}}
                    for name, share in (("initial", 0.1), ("baseline", baseline), ("augmented", augmented))}
        write_json(run / "summary.json", summary)
        runs.append(run)
    results = compare.run_results(runs)
    assert compare.measured(results) == ["weak_solved", "weak_avg_k"]
    assert "Avg@k" in rendered(compare.comparison_table(results, "weak_avg_k"))
    assert ("weak problems, Avg@k: augmented ahead of the baseline in 2 of 2 runs; mean +2.5 points, sd 0.7, "
            "SEM 0.5: above 2 SEM") in compare.verdict(results).splitlines()


def test_compare_breaks_each_difference_down_by_family_and_shows_each_arms_weak_draws(tmp_path: Path) -> None:
    import polars as pl

    from sws.tables import write_table

    runs = []
    for seed, right in ((0, 3), (1, 1)):
        run = evaluated_run(tmp_path, seed, 0.2, 0.3)
        write_table(run, "eval/problems", pl.DataFrame([
            {"checkpoint": checkpoint, "eval_set": "weak_like", "problem_id": "q1", "category": "addition",
             "greedy_correct": True, "n": 4, "n_correct": n_right, "k": 4, "problem": "Compute 47+85."}
            for checkpoint, n_right in (("baseline", 1), ("augmented", right))]))
        write_table(run, "weakness", pl.DataFrame({
            "problem_id": ["q0"], "category": ["addition"], "accs": [[0.0]], "n_record": [1], "max_acc": [0.0],
            "slope": [0.0], "weak": [True]}))
        for arm, drawn in (("baseline", ["q0", "q0"]), ("augmented", ["q0", "x1"])):
            write_table(run, f"train/{arm}/rollouts", pl.DataFrame(
                {"step": [1, 2], "problem_id": drawn, "n": [4, 4], "n_correct": [1, 1]}))
        runs.append(run)
    gains, draws = compare.where_the_gain_sits(runs)
    rows = {(row[0], row[1]): row for row in table_cells(rendered(gains, width=200))}
    # +50 and 0 points: mean +25, SEM 25
    assert rows[("family", "addition: addition with carrying")][2:] == ["aug − base", "2", "2", "+25.0", "25.0"]
    assert rows[("category", "addition")][5] == "+25.0"
    assert {row[0]: row[1] for row in table_cells(rendered(draws))} == {"baseline": "2.00", "augmented": "1.00"}
    assert compare.where_the_gain_sits([evaluated_run(tmp_path / "bare", 2, 0.2, 0.3)]) == []


def refusal(*runs: Path) -> str:
    result = CliRunner().invoke(app, ["compare", *map(str, runs)])
    assert result.exit_code == 2, result.output
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and "differ only in seed" in line
    return line


def test_runs_of_other_worlds_are_not_pooled(tmp_path: Path) -> None:
    other = evaluated_run(tmp_path, 1, 0.2, 0.3)
    save_run_config(other, PipelineConfig(seed=1, world="math"))
    assert "world 'math'" in refusal(evaluated_run(tmp_path, 0, 0.2, 0.3), other)


def test_runs_with_another_setting_than_the_seed_are_not_pooled(tmp_path: Path) -> None:
    other = evaluated_run(tmp_path, 1, 0.2, 0.3)
    changed = PipelineConfig(seed=1)
    changed.synthesize.budget = 7
    save_run_config(other, changed)
    assert "field 'synthesize.budget' is 7" in refusal(evaluated_run(tmp_path, 0, 0.2, 0.3), other)


def test_paths_inside_each_run_are_not_a_difference(tmp_path: Path) -> None:
    runs = [evaluated_run(tmp_path, seed, 0.2, 0.3) for seed in (0, 1)]
    for seed, run in enumerate(runs):
        cfg = PipelineConfig(seed=seed)
        cfg.select.pool = str(run / "pool.parquet")
        save_run_config(run, cfg)
    assert CliRunner().invoke(app, ["compare", *map(str, runs)]).exit_code == 0


def test_a_copy_of_a_run_is_not_a_second_seed(tmp_path: Path) -> None:
    run = evaluated_run(tmp_path, 0, 0.2, 0.3)
    copy = tmp_path / "copy"
    shutil.copytree(run, copy)
    assert "seed 0, the same as" in refusal(run, copy)

    # a copy whose seed was edited still has the first run's tables
    (run / "augmented.parquet").write_bytes(b"PAR1 the training set PAR1")
    shutil.copy(run / "augmented.parquet", copy / "augmented.parquet")
    save_run_config(copy, PipelineConfig(seed=5))
    assert "augmented.parquet: the same bytes as in" in refusal(run, copy)


def test_the_share_of_the_family_oracles_gain_that_synthesis_recovers_is_one_line(tmp_path: Path) -> None:
    runs = []
    for seed, (baseline, augmented, oracle) in enumerate([(0.10, 0.11, 0.14), (0.20, 0.20, 0.23), (0.15, 0.17, 0.17)]):
        run = evaluated_run(tmp_path, seed, 0.2, 0.2)
        summary = json.loads((run / "summary.json").read_text())
        summary |= {f"weak_like_avg_k_{name}": {"overall": share, "per_category": {}}
                    for name, share in (("baseline", baseline), ("augmented", augmented), ("oracle_family", oracle))}
        write_json(run / "summary.json", summary)
        runs.append(run)
    lines = compare.verdict([compare.run_result(run) for run in runs]).splitlines()
    # mean gain: augmented +1.0, the family oracle +3.0 points
    assert lines[-1] == ("fresh problems of their families (weak_like), Avg@k: synthesis recovers 33 % of the "
                         "family oracle's gain over the baseline (mean +1.0 against +3.0 points)")
    assert any(line.startswith("fresh problems of their families (weak_like), Avg@k: oracle_family ahead of the "
                               "baseline in 3 of 3 runs") for line in lines)


def test_without_the_family_oracle_no_efficiency_is_claimed(tmp_path: Path) -> None:
    runs = [evaluated_run(tmp_path, seed, 0.2, 0.25, like=(0.1, 0.12)) for seed in range(2)]
    assert "recovers" not in compare.verdict([compare.run_result(run) for run in runs])
