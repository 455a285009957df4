from pathlib import Path

import numpy as np
import polars as pl
import pytest
from typer.testing import CliRunner

from sws import runner
from sws.atomic_files import write_parquet
from sws.cli import app
from sws.config import IdentifyConfig, PipelineConfig
from sws.errors import UserError
from sws.manifests import read_manifest
from sws.run_dir import RunDir
from sws.stages import identify
from sws.tables import read_table, table_path, write_table


def problems_table(categories: dict[str, str]) -> pl.DataFrame:
    ids = list(categories)
    return pl.DataFrame({
        "problem_id": ids, "problem": [f"Compute {i}+1." for i in range(len(ids))],
        "answer": [str(i + 1) for i in range(len(ids))], "category": list(categories.values()),
        "source": ["test"] * len(ids),
    })


def rollouts_table(accs: dict[str, list[float]], n: int = 8) -> pl.DataFrame:
    """One row per accuracy, steps 10, 20, ... in list order, written in reverse to check the sort."""
    rows = [(10 * (step + 1), pid, n, round(acc * n)) for pid, values in accs.items() for step, acc in enumerate(values)]
    return pl.DataFrame(rows[::-1], schema={"step": pl.Int64, "problem_id": pl.Utf8, "n": pl.Int64,
                                            "n_correct": pl.Int64}, orient="row")


def weakness_table(problems: pl.DataFrame, rollouts: pl.DataFrame, rule: IdentifyConfig) -> pl.DataFrame:
    return identify.weakness_table(problems, identify.record_stats(rollouts), rule)


def weakness_of(accs: dict[str, list[float]], rule: IdentifyConfig | None = None, n: int = 8) -> dict[str, dict]:
    problems = problems_table(dict.fromkeys(accs, "algebra"))
    table = weakness_table(problems, rollouts_table(accs, n), rule or IdentifyConfig())
    return {row["problem_id"]: row for row in table.iter_rows(named=True)}


def test_accs_are_ordered_by_step_and_slopes_are_hand_computed() -> None:
    rows = weakness_of({"up": [0.0, 0.5, 1.0], "down": [1.0, 0.5, 0.25, 0.0], "one": [0.375]})
    assert rows["up"]["accs"] == [0.0, 0.5, 1.0]
    # x = 0..2, mean 1: ((-1)(0) + 0 + (1)(1)) / 2 = 0.5
    assert rows["up"]["slope"] == pytest.approx(0.5)
    # x = 0..3, mean 1.5, Sxx = 5: (-1.5 - 0.25 + 0.125 + 0) / 5 = -0.325
    assert rows["down"]["slope"] == pytest.approx(-0.325)
    assert rows["down"]["max_acc"] == 1.0 and rows["down"]["n_record"] == 4
    assert rows["one"]["slope"] == 0.0 and rows["one"]["max_acc"] == 0.375


def test_slopes_agree_with_polyfit_on_random_histories() -> None:
    rng = np.random.default_rng(7)
    accs = {f"p{i}": list(rng.integers(0, 9, rng.integers(2, 30)) / 8) for i in range(200)}
    rows = weakness_of(accs)
    for pid, values in accs.items():
        assert rows[pid]["slope"] == pytest.approx(np.polyfit(np.arange(len(values)), values, 1)[0], abs=1e-12)
        assert rows[pid]["max_acc"] == max(values)


def test_a_log_in_step_order_and_a_shuffled_one_give_the_same_table() -> None:
    rng = np.random.default_rng(3)
    accs = {f"p{i}": list(rng.integers(0, 9, rng.integers(1, 12)) / 8) for i in range(50)}
    problems, shuffled = problems_table(dict.fromkeys(accs, "algebra")), rollouts_table(accs)
    in_step_order = shuffled.sort("step")
    assert in_step_order["step"].is_sorted() and not shuffled["step"].is_sorted()
    assert weakness_table(problems, in_step_order, IdentifyConfig()).equals(
        weakness_table(problems, shuffled, IdentifyConfig()))


def test_ties_in_step_keep_log_order() -> None:
    problems = problems_table({"p": "algebra"})
    rollouts = pl.DataFrame({"step": [5, 5, 1], "problem_id": ["p"] * 3, "n": [4] * 3, "n_correct": [1, 3, 0]})
    table = weakness_table(problems, rollouts, IdentifyConfig())
    assert table["accs"].to_list() == [[0.0, 0.25, 0.75]]


def test_inclusive_boundaries_are_weak_and_strict_ones_are_not() -> None:
    accs = {"half_flat": [0.5, 0.5, 0.5], "zeros": [0.0, 0.0, 0.0, 0.0], "half_down": [0.5, 0.25],
            "above": [0.625, 0.0, 0.0], "rising": [0.0, 0.125]}
    inclusive = weakness_of(accs)
    assert inclusive["half_flat"]["slope"] == 0.0 and inclusive["zeros"]["slope"] == 0.0
    assert {pid for pid, row in inclusive.items() if row["weak"]} == {"half_flat", "zeros", "half_down"}
    strict = weakness_of(accs, IdentifyConfig(strict_max_acc=True, strict_slope=True))
    assert {pid for pid, row in strict.items() if row["weak"]} == set()
    both = IdentifyConfig(strict_max_acc=True, strict_slope=True)
    assert weakness_of({"low_down": [0.25, 0.0]}, both)["low_down"]["weak"]
    strict_acc = weakness_of(accs, IdentifyConfig(strict_max_acc=True))
    assert {pid for pid, row in strict_acc.items() if row["weak"]} == {"zeros"}
    strict_slope = weakness_of(accs, IdentifyConfig(strict_slope=True))
    assert {pid for pid, row in strict_slope.items() if row["weak"]} == {"half_down"}


def test_an_old_strict_flag_sets_both_thresholds_and_a_disagreeing_one_is_refused() -> None:
    assert IdentifyConfig.model_validate({"strict": True}).model_dump() == IdentifyConfig(
        strict_max_acc=True, strict_slope=True).model_dump()
    assert not IdentifyConfig.model_validate({"strict": False}).strict_slope
    with pytest.raises(ValueError, match="'strict' .* 'strict_slope'"):
        IdentifyConfig.model_validate({"strict": True, "strict_slope": False})


# Ten accuracy trajectories the authors' failure record (max_acc <= 0.5 and slope <= 0) marks weak, the
# boundaries included (never solved: slope exactly 0; flat at one half), and four it does not.
AUTHORS_WEAK = {
    "never": [0, 0, 0, 0, 0], "never_twice": [0, 0], "flat_half": [0.5, 0.5, 0.5], "falling": [0.5, 0.5, 0.375, 0.25],
    "half_then_zero": [0.5, 0], "flat_low": [0.125, 0.125, 0.125], "low_falling": [0.25, 0.125, 0.0],
    "dip_back": [0.375, 0.125, 0.375], "one_then_none": [0.125, 0, 0, 0], "wobble_down": [0.5, 0.25, 0.375, 0.125],
}
AUTHORS_NOT_WEAK = {"rising": [0, 0.125], "once_above": [0.625, 0, 0], "flat_above": [0.625, 0.625],
                    "half_rising": [0.25, 0.5]}


def math_presets() -> list[str]:
    from sws.config import load_config
    from sws.presets import PRESET_DIR, preset_names

    return [name for name in preset_names() if load_config(PRESET_DIR / f"{name}.yaml").world == "math"]


@pytest.mark.parametrize("preset", math_presets())
def test_every_math_preset_marks_the_authors_ten_weak_problems_and_no_other(preset: str) -> None:
    from sws.config import load_config
    from sws.presets import PRESET_DIR

    rule = load_config(PRESET_DIR / f"{preset}.yaml").identify
    rows = weakness_of({**AUTHORS_WEAK, **AUTHORS_NOT_WEAK}, rule)
    assert {pid for pid, row in rows.items() if row["weak"]} == set(AUTHORS_WEAK)


def test_the_math_presets_are_all_checked() -> None:
    assert len(math_presets()) >= 4 and "self-evolving-math" in math_presets()


def test_flat_trajectories_of_inexact_accuracies_have_slope_exactly_zero() -> None:
    rows = weakness_of({f"p{k}": [k / 7] * 9 for k in range(1, 4)}, n=7)
    assert all(row["slope"] == 0.0 and row["weak"] for row in rows.values())


def test_thresholds_and_min_records() -> None:
    accs = {"once": [0.0], "twice": [0.25, 0.25], "slightly_up": [0.25, 0.375]}
    assert [row["weak"] for row in weakness_of(accs).values()] == [True, True, False]
    assert [row["weak"] for row in weakness_of(accs, IdentifyConfig(min_records=2)).values()] == [False, True, False]
    loose = IdentifyConfig(max_slope=0.2, max_acc=0.375)
    assert [row["weak"] for row in weakness_of(accs, loose).values()] == [True, True, True]


def test_never_rolled_out_problems_are_listed_and_not_weak() -> None:
    problems = problems_table({"seen": "algebra", "unseen": "geometry"})
    for min_records in (0, 1):
        table = weakness_table(problems, rollouts_table({"seen": [0.0]}), IdentifyConfig(min_records=min_records))
        unseen = table.row(1, named=True)
        assert unseen == {"problem_id": "unseen", "category": "geometry", "accs": [], "n_record": 0,
                          "max_acc": None, "slope": None, "weak": False}


def test_category_table_fail_ratios_and_shares() -> None:
    categories = {"a1": "algebra", "a2": "algebra", "g1": "geometry", "g2": "geometry", "g3": "geometry",
                  "g4": "geometry", "n1": "number_theory"}
    accs = {"a1": [0.0], "a2": [0.0], "g1": [0.0], "g2": [1.0], "g3": [1.0], "n1": [1.0]}
    problems = problems_table(categories)
    table = identify.category_table(weakness_table(problems, rollouts_table(accs), IdentifyConfig()))
    assert table["category"].to_list() == ["algebra", "geometry", "number_theory"]
    assert table["n_problems"].to_list() == [2, 4, 1]
    assert table["n_rolled_out"].to_list() == [2, 3, 1]
    assert table["n_weak"].to_list() == [2, 1, 0]
    # g4 was never rolled out: the fail ratio counts only the problems in the rollout log
    assert table["fail_ratio"].to_list() == pytest.approx([1.0, 1 / 3, 0.0])
    assert table["share"].to_list() == pytest.approx([0.75, 0.25, 0.0])


def test_persisting_weak_problems_weigh_persist_weight_times_in_the_share() -> None:
    problems = problems_table({"a1": "algebra", "a2": "algebra", "g1": "geometry", "g2": "geometry"})
    weakness = weakness_table(problems, rollouts_table({"a1": [0.0], "a2": [1.0], "g1": [0.0], "g2": [1.0]}),
                              IdentifyConfig())
    prior_weak = pl.Series(["a1", "a2", "g2"])  # a1 still weak; a2 and g2 no longer
    table = identify.category_table(weakness, prior_weak, persist_weight=3.0)
    assert table["n_persisting"].to_list() == [1, 0]
    assert table["fail_ratio"].to_list() == pytest.approx([0.5, 0.5])
    assert table["share"].to_list() == pytest.approx([0.75, 0.25])  # (0.5 + 2 * 0.5) : 0.5
    assert identify.category_table(weakness, prior_weak)["share"].to_list() == pytest.approx([0.5, 0.5])


def test_a_category_never_rolled_out_has_fail_ratio_zero() -> None:
    problems = problems_table({"a": "algebra", "b": "geometry"})
    weakness = weakness_table(problems, rollouts_table({"a": [0.0]}), IdentifyConfig())
    assert identify.category_table(weakness)["fail_ratio"].to_list() == [1.0, 0.0]


def test_no_weak_problem_gives_zero_shares() -> None:
    problems = problems_table({"a": "algebra", "b": "geometry"})
    weakness = weakness_table(problems, rollouts_table({"a": [1.0], "b": [0.75]}), IdentifyConfig())
    assert identify.category_table(weakness)["share"].to_list() == [0.0, 0.0]


# ---------------------------------------------------------------- the stage


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    """A run directory holding only problems.parquet and rollouts.parquet."""
    categories = {"a1": "algebra", "a2": "algebra", "g1": "geometry", "g2": "geometry"}
    write_table(tmp_path, "problems", problems_table(categories))
    write_table(tmp_path, "rollouts", rollouts_table({"a1": [0.0, 0.25], "a2": [0.5, 0.5], "g1": [0.25, 1.0]}))
    return tmp_path


def test_cli_on_a_run_with_only_problems_and_rollouts(run_dir: Path) -> None:
    result = CliRunner().invoke(app, ["identify", "--run", str(run_dir)])
    assert result.exit_code == 0, result.output
    weakness = read_table(run_dir, "weakness")
    assert weakness.filter(pl.col("weak"))["problem_id"].to_list() == ["a2"]  # a1 rises, g1 reaches 1, g2 unseen
    assert read_table(run_dir, "categories")["n_weak"].to_list() == [1, 0]
    for name in (identify.TRAJECTORY_PLOT, identify.FAIL_RATIO_PLOT):
        assert (RunDir(run_dir).plots / name).read_bytes().startswith(b"\x89PNG")
    assert "Weak problems per category" in result.output and "algebra" in result.output
    assert read_manifest(run_dir, "identify")["rows"] == {"weakness": 4, "categories": 2}


def test_cli_options_reach_the_rule(run_dir: Path) -> None:
    result = CliRunner().invoke(app, ["identify", "--run", str(run_dir), "--max-slope", "0.3", "--strict-max-acc", "--strict-slope"])
    assert result.exit_code == 0, result.output
    assert read_table(run_dir, "weakness").filter(pl.col("weak"))["problem_id"].to_list() == ["a1"]
    assert read_table(run_dir, "categories")["share"].to_list() == [1.0, 0.0]


def test_manifest_skips_an_unchanged_rerun_and_reruns_on_change(run_dir: Path) -> None:
    first = runner.run(identify.STAGE, PipelineConfig(), run_dir)
    assert not first.skipped
    assert runner.run(identify.STAGE, PipelineConfig(), run_dir).skipped
    assert not runner.run(identify.STAGE, PipelineConfig(), run_dir, force=True).skipped
    assert not runner.run(identify.STAGE, PipelineConfig.model_validate({"identify": {"min_records": 2}}), run_dir).skipped
    write_table(run_dir, "rollouts", rollouts_table({"a1": [0.0, 0.0]}))
    result = runner.run(identify.STAGE, PipelineConfig.model_validate({"identify": {"min_records": 2}}), run_dir)
    assert not result.skipped and result.info["n_weak"] == 1


@pytest.mark.parametrize("rollouts, message", [
    (pl.DataFrame({"step": [1], "problem_id": ["a1"], "n": [4], "n_correct": [5]}), "'n_correct' must lie in 0..n"),
    (pl.DataFrame({"step": [1], "problem_id": ["a1"], "n": [0], "n_correct": [0]}), "'n' must be at least 1"),
    (pl.DataFrame({"step": [1, 2], "problem_id": ["a1", "zz"], "n": [4, 4], "n_correct": [1, 1]}), "'zz'"),
    (pl.DataFrame({"step": [1], "problem_id": [None], "n": [4], "n_correct": [1]},
                  schema_overrides={"problem_id": pl.Utf8}), "'problem_id' has 1 null"),
    (pl.DataFrame(schema={"step": pl.Int64, "problem_id": pl.Utf8, "n": pl.Int64, "n_correct": pl.Int64}),
     "has no rows"),
    (pl.DataFrame({"step": ["1"], "problem_id": ["a1"], "n": [4], "n_correct": [1]}), "'step' has type String"),
    (pl.DataFrame({"step": [1], "problem_id": ["a1"], "n": [4]}), "missing column 'n_correct'"),
])
def test_bad_rollouts_exit_2_with_one_line_and_write_nothing(run_dir: Path, rollouts: pl.DataFrame,
                                                             message: str) -> None:
    write_parquet(rollouts, table_path(run_dir, "rollouts"))
    result = CliRunner().invoke(app, ["identify", "--run", str(run_dir)])
    assert result.exit_code == 2
    assert message in result.output and "rollouts.parquet" in result.output
    assert result.output.startswith("error: ") and len(result.output.strip().splitlines()) == 1
    assert not table_path(run_dir, "weakness").exists()
    assert not RunDir(run_dir).plots.exists()


def test_a_failed_rerun_keeps_the_previous_outputs(run_dir: Path) -> None:
    runner.run(identify.STAGE, PipelineConfig(), run_dir)
    before = table_path(run_dir, "weakness").read_bytes()
    write_parquet(pl.DataFrame({"step": [1], "problem_id": ["a1"], "n": [4], "n_correct": [9]}),
                  table_path(run_dir, "rollouts"))
    with pytest.raises(UserError):
        runner.run(identify.STAGE, PipelineConfig(), run_dir)
    assert table_path(run_dir, "weakness").read_bytes() == before


def test_missing_inputs_and_bad_options_exit_2(tmp_path: Path, run_dir: Path) -> None:
    missing = CliRunner().invoke(app, ["identify", "--run", str(tmp_path / "empty")])
    assert missing.exit_code == 2 and "sws prepare" in missing.output
    (tmp_path / "only_problems").mkdir()
    write_table(tmp_path / "only_problems", "problems", problems_table({"a": "algebra"}))
    no_log = CliRunner().invoke(app, ["identify", "--run", str(tmp_path / "only_problems")])
    assert no_log.exit_code == 2 and "sws ingest" in no_log.output
    negative = CliRunner().invoke(app, ["identify", "--run", str(run_dir), "--min-records", "-1"])
    assert negative.exit_code == 2 and "identify.min_records" in negative.output
    assert "Traceback" not in missing.output + no_log.output + negative.output


def test_duplicate_problem_ids_are_an_error(run_dir: Path) -> None:
    write_table(run_dir, "problems", problems_table({"a1": "algebra"}).vstack(problems_table({"a1": "algebra"})))
    with pytest.raises(UserError, match="'problem_id' repeats"):
        runner.run(identify.STAGE, PipelineConfig(), run_dir)
