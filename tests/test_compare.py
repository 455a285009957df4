import io
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from sws import compare
from sws.artifacts import write_json
from sws.cli import app
from sws.config import PipelineConfig, save_run_config
from sws.errors import UserError


def evaluated_run(root: Path, seed: int, baseline: float | None, augmented: float | None, like: tuple | None = None) -> Path:
    run = root / f"run-s{seed}"
    save_run_config(run, PipelineConfig(seed=seed))
    summary = {f"weak_solved_{name}": {"overall": share, "per_category": {}}
               for name, share in (("initial", 0.1), ("baseline", baseline), ("augmented", augmented))}
    if like is not None:
        summary |= {f"weak_like_solved_{name}": {"overall": share, "per_category": {}}
                    for name, share in zip(("baseline", "augmented"), like, strict=True)}
    write_json(run / "summary.json", {**summary, "n_weak": 100})
    return run


def rendered(table) -> str:
    console = Console(file=io.StringIO(), width=150)
    console.print(table)
    return console.file.getvalue()


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
    assert compare.verdict(results) == "augmented ahead of the baseline in 2 of 3 runs; mean +1.0 points, sd 4.0"


def test_the_fresh_problems_column_appears_only_where_eval_measured_it(tmp_path: Path) -> None:
    plain = compare.run_result(evaluated_run(tmp_path, 0, 0.2, 0.3))
    assert "aug − base, fresh" not in rendered(compare.comparison_table([plain]))
    arith = compare.run_result(evaluated_run(tmp_path, 1, 0.2, 0.3, like=(0.30, 0.36)))
    text = rendered(compare.comparison_table([plain, arith]))
    assert "aug − base, fresh" in text and "+6.0" in text


def test_one_run_has_no_spread(tmp_path: Path) -> None:
    result = compare.run_result(evaluated_run(tmp_path, 0, 0.2, 0.3))
    assert compare.verdict([result]) == "augmented ahead of the baseline in 1 of 1 runs; mean +10.0 points"


def test_runs_without_weak_problems_say_so(tmp_path: Path) -> None:
    result = compare.run_result(evaluated_run(tmp_path, 0, None, None))
    assert result.gaps["weak_solved"] is None
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
