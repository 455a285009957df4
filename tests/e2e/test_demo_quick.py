"""The whole method on the arith world with the quick preset, through the real `sws run` command."""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml

from sws.arms import training_sets
from sws.config import load_config
from sws.manifests import cpu_kernels
from sws.pipeline import pipeline_steps
from sws.presets import PRESET_DIR
from sws.stages.eval import WEAK_LIKE_SET

REPO = Path(__file__).resolve().parents[2]
SWS = Path(sys.executable).parent / "sws"
ARMS = ("initial", "augmented", "baseline", "selected", "random_selected", "untargeted", "oracle_family",
        "oracle_family_large")
ARTIFACTS = [
    "problems.parquet", "rollouts.parquet", "weakness.parquet", "categories.parquet", "concepts.parquet",
    "synthetic.parquet", "rated.parquet", "labeled.parquet", "filtered.parquet", "filtered.rejected.parquet",
    "augmented.parquet", "verl/augmented.parquet", "eval/problems.parquet", "eval/benchmarks.parquet",
    "eval/weakness.parquet", "report.html", "summary.json", "config.yaml", "pool/arith.jsonl", "selected.parquet",
    "selected_mix.parquet", "random_selected.parquet", "random_selected_mix.parquet",
    "untargeted/weakness.parquet", "untargeted/concepts.parquet", "untargeted/augmented.parquet",
    "oracle_family_mix.parquet", "oracle_family_large_mix.parquet",
    *(f"train/{kind}/final/config.json" for kind in ARMS),
]


# The quick preset, logging its training to tensorboard when that is installed (the `tensorboard` extra).
TRACKER = "tensorboard" if importlib.util.find_spec("tensorboard") else "none"


def pipeline_of(run_dir: Path) -> Path:
    return run_dir.parent / "quick.yaml"


def sws_run(run_dir: Path, *options: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1"}
    return subprocess.run([str(SWS), "run", str(pipeline_of(run_dir)), "--run", str(run_dir), *options], cwd=REPO,
                          env=env, capture_output=True, text=True, timeout=1800)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, subprocess.CompletedProcess]:
    run_dir = tmp_path_factory.mktemp("quick") / "run"
    quick = yaml.safe_load((PRESET_DIR / "quick.yaml").read_text())
    pipeline_of(run_dir).write_text(yaml.safe_dump({**quick, "train": {**quick["train"], "report_to": TRACKER}}))
    return run_dir, sws_run(run_dir)


@pytest.mark.e2e
@pytest.mark.slow
def test_quick_pipeline_writes_every_artifact(quick_run) -> None:
    run_dir, result = quick_run
    assert result.returncode == 0, result.stderr[-3000:]
    missing = [name for name in ARTIFACTS if not (run_dir / name).exists()]
    assert not missing
    augmented = pl.read_parquet(run_dir / "augmented.parquet")
    assert augmented["problem_id"].n_unique() == augmented.height
    assert augmented.filter(pl.col("source").str.starts_with("syn/")).height > 0
    assert "rule-based stand-in for teacher models" in (run_dir / "report.html").read_text()


@pytest.mark.e2e
@pytest.mark.slow
def test_the_selected_arm_adds_as_many_pool_problems_as_synthesis_kept_and_trains_as_long(quick_run) -> None:
    run_dir, result = quick_run
    assert result.returncode == 0, result.stderr[-3000:]
    problems, selected = pl.read_parquet(run_dir / "problems.parquet"), pl.read_parquet(run_dir / "selected.parquet")
    assert 0 < selected.height <= pl.read_parquet(run_dir / "filtered.parquet").height
    selected_mix = pl.read_parquet(run_dir / "selected_mix.parquet")
    assert set(selected_mix["problem_id"]) == set(problems["problem_id"]) | set(selected["problem_id"])
    augmented = pl.read_parquet(run_dir / "augmented.parquet")
    assert not set(augmented["problem_id"]) & set(selected["problem_id"])
    curves = {kind: pl.read_parquet(run_dir / "train" / kind / "curve.parquet").height
              for kind in ("augmented", "baseline", "selected")}
    assert len(set(curves.values())) == 1
    assert "Synthesis against selection" in (run_dir / "report.html").read_text()


@pytest.mark.e2e
@pytest.mark.slow
def test_the_controls_train_as_long_on_random_seeds_and_random_pool_problems(quick_run) -> None:
    run_dir, result = quick_run
    assert result.returncode == 0, result.stderr[-3000:]
    weak = pl.read_parquet(run_dir / "weakness.parquet").filter(pl.col("weak"))["problem_id"]
    drawn = pl.read_parquet(run_dir / "untargeted" / "weakness.parquet").filter(pl.col("weak"))["problem_id"]
    assert drawn.len() == weak.len() and set(drawn) != set(weak)
    assert set(pl.read_parquet(run_dir / "untargeted" / "concepts.parquet")["problem_id"]) <= set(drawn)
    selected = pl.read_parquet(run_dir / "selected.parquet")
    assert pl.read_parquet(run_dir / "random_selected.parquet").height == selected.height
    curves = {kind: pl.read_parquet(run_dir / "train" / kind / "curve.parquet").height
              for kind in ("augmented", "untargeted", "random_selected")}
    assert len(set(curves.values())) == 1
    summary = json.loads((run_dir / "summary.json").read_text())
    assert {"weak_like_solved_untargeted", "weak_like_solved_random_selected"} <= set(summary)
    assert "Where the gain sits" in (run_dir / "report.html").read_text()


@pytest.mark.e2e
@pytest.mark.slow
def test_quick_pipeline_prints_and_saves_the_headline(quick_run) -> None:
    run_dir, result = quick_run
    assert result.returncode == 0, result.stderr[-3000:]
    summary = json.loads((run_dir / "summary.json").read_text())
    for checkpoint in ("initial", "baseline", "augmented", "selected"):
        solved = summary[f"weak_solved_{checkpoint}"]
        assert 0.0 <= solved["overall"] <= 1.0
        assert solved["per_category"]
        assert all(0.0 <= share <= 1.0 for share in solved["per_category"].values())
    assert summary["n_weak"] > 0
    assert result.stdout.lstrip().startswith("The answer: Avg@k on the held-out sets")
    assert "previously weak (training) problems solved" in result.stdout
    assert f"report: {run_dir / 'report.html'}" in result.stdout


@pytest.mark.e2e
@pytest.mark.slow
def test_the_console_gives_one_cache_line_per_stage_and_whole_tables(quick_run) -> None:
    run_dir, result = quick_run
    assert result.returncode == 0, result.stderr[-3000:]
    cache_lines = [line for line in result.stderr.splitlines() if "request cache" in line]
    assert cache_lines and all(re.fullmatch(r"\S+: request cache \d+ hits, \d+ misses \(\d+% reused\)", line)
                               for line in cache_lines), cache_lines
    # at most one per stage that ran (the untargeted control's stages run in untargeted/, with their own manifests)
    assert len(cache_lines) <= len(list(run_dir.rglob("manifests/*.json")))
    # captured output is not a terminal: the tables get a wide console, so no number is cut
    assert "…" not in result.stdout


@pytest.mark.e2e
@pytest.mark.slow
def test_rerun_skips_every_stage_and_keeps_the_results(quick_run) -> None:
    run_dir, first = quick_run
    assert first.returncode == 0, first.stderr[-3000:]

    def manifests() -> dict[str, str]:
        return {path.name: path.read_text() for path in (run_dir / "manifests").glob("*.json")}

    before, summary = manifests(), (run_dir / "summary.json").read_text()
    again = sws_run(run_dir)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "up to date, skipped" in again.stderr
    assert manifests() == before
    assert (run_dir / "summary.json").read_text() == summary


# Whether train_initial and the `start` evaluation would be skipped as current, planned in a fresh process (the
# float environment is taken at torch's start).
CURRENT = """
import sys
from pathlib import Path
from sws.config import load_run_config
from sws.runner import is_current
from sws.stage import get_stage
from sws.stages.eval import PARTS
run = Path(sys.argv[1])
cfg = load_run_config(run)
print(is_current(get_stage("train_initial"), cfg, run), is_current(PARTS["start"], cfg, run))
"""


def current_under(run_dir: Path, **kernels: str) -> str:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", **kernels}
    env = {name: value for name, value in env.items() if value}
    result = subprocess.run([sys.executable, "-c", CURRENT, str(run_dir)], cwd=REPO, env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout.strip()


def commuted_twin(problem: str) -> str | None:
    """`Compute 47+8.` for `Compute 8+47.`: the operand-swapped text of a one-operation sum or product."""
    match = re.fullmatch(r"Compute (\d+)([+*])(\d+)\.", problem)
    return f"Compute {match[3]}{match[2]}{match[1]}." if match and match[1] != match[3] else None


def other_kernels(ran_under: str) -> str:
    """An ATEN_CPU_CAPABILITY whose kernels differ from those of a run made under `ran_under` (unset: the CPU's
    widest). Unsetting it is no change on a CPU whose widest is AVX2, so the scalar `default` kernels are the other
    choice for any vectorised run, and AVX2 for a run that used `default`."""
    used = ran_under or cpu_kernels() or ""
    return "avx2" if used.lower() == "default" else "default"


@pytest.mark.parametrize(("cpu", "ran_under"), [("AVX2", "avx2"), ("AVX2", ""), ("AVX512", "avx2"),
                                                ("AVX512", ""), ("AVX512", "default")])
def test_the_other_kernels_differ_from_the_runs_on_either_kind_of_cpu(monkeypatch, cpu, ran_under) -> None:
    monkeypatch.setitem(globals(), "cpu_kernels", lambda: cpu)
    def kernels(setting: str) -> str:  # what torch uses under an ATEN_CPU_CAPABILITY value (unset: the widest)
        return (setting or cpu).lower()

    assert kernels(other_kernels(ran_under)) != kernels(ran_under)
    assert other_kernels(ran_under) in ("default", "avx2")  # both exist on every x86 CPU torch runs on


@pytest.mark.e2e
@pytest.mark.slow
def test_other_kernels_or_another_warm_start_policy_rerun_training_from_the_start(quick_run) -> None:
    run_dir, result = quick_run
    assert result.returncode == 0, result.stderr[-3000:]
    ran_under = os.environ.get("ATEN_CPU_CAPABILITY", "")
    assert current_under(run_dir) == "True True"
    assert current_under(run_dir, ATEN_CPU_CAPABILITY=other_kernels(ran_under)) == "False False"
    # MKL's other reproducibility mode: another cached warm-start policy, never the one the run trained from
    assert current_under(run_dir, MKL_CBWR="COMPATIBLE") == "False False"


@pytest.mark.e2e
@pytest.mark.slow
def test_with_report_to_tensorboard_each_training_arm_writes_event_files(quick_run) -> None:
    if TRACKER != "tensorboard":
        pytest.skip("tensorboard is not installed: pip install -e '.[tensorboard]' (make install has it)")
    run_dir, result = quick_run
    assert result.returncode == 0, result.stderr[-3000:]
    for arm in ARMS:
        assert list((run_dir / "train" / arm / "tracking").glob("events.out.tfevents.*")), arm


def snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(path): (path.stat().st_size, path.stat().st_mtime_ns) for path in folder.rglob("*")}


@pytest.mark.e2e
@pytest.mark.slow
def test_dry_run_of_the_finished_run_finds_every_step_up_to_date_and_writes_nothing(quick_run) -> None:
    run_dir, first = quick_run
    assert first.returncode == 0, first.stderr[-3000:]
    before = snapshot(run_dir)

    planned = sws_run(run_dir, "--dry-run")

    assert planned.returncode == 0, planned.stderr[-3000:]
    rows = [line for line in planned.stdout.splitlines() if line.startswith("│")]
    assert len(rows) == len(pipeline_steps(load_config(pipeline_of(run_dir))))
    assert all(line.rstrip(" │").endswith("up to date") for line in rows)
    assert snapshot(run_dir) == before


@pytest.mark.e2e
@pytest.mark.slow
def test_dry_run_with_a_changed_setting_names_the_first_stage_that_would_run(quick_run) -> None:
    run_dir, first = quick_run
    assert first.returncode == 0, first.stderr[-3000:]
    changed = run_dir.parent / "changed.yaml"
    quick = yaml.safe_load(pipeline_of(run_dir).read_text())
    changed.write_text(yaml.safe_dump({**quick, "filter": {**quick.get("filter", {}), "rollouts": 6}}))
    before = snapshot(run_dir)

    planned = subprocess.run([str(SWS), "run", str(changed), "--run", str(run_dir), "--dry-run"],
                             capture_output=True, text=True, timeout=600)

    assert planned.returncode == 0, planned.stderr[-3000:]
    status = {cells[1]: cells[2] for cells in ([cell.strip() for cell in line.strip("│").split("│")]
                                               for line in planned.stdout.splitlines() if line.startswith("│"))}
    assert status["synthesize"] == "up to date"
    assert status["filter"] == "would run: score: its settings changed"
    assert status["report"] == "would run: waits on filter, which would run first"
    assert snapshot(run_dir) == before


@pytest.mark.e2e
@pytest.mark.slow
def test_weak_like_holds_no_commuted_twin_of_a_training_problem(quick_run) -> None:
    run_dir, result = quick_run
    assert result.returncode == 0, result.stderr[-3000:]
    trained = set(pl.concat([pl.read_parquet(run_dir / f"{name}.parquet").select("problem")
                             for name in training_sets()])["problem"])
    weak_like = pl.read_parquet(run_dir / "eval/problems.parquet").filter(pl.col("eval_set") == WEAK_LIKE_SET)
    twins = [problem for problem in set(weak_like["problem"]) if commuted_twin(problem) in trained]
    assert weak_like.height > 0 and any(commuted_twin(problem) for problem in weak_like["problem"])
    assert not twins
