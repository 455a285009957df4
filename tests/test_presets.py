"""The shipped pipelines (src/sws/pipelines/*.yaml) carry the paper's settings where they say so."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from sws import held_out
from sws.cli import app
from sws.config import load_config
from sws.errors import UserError
from sws.presets import PRESET_DIR, pipeline_file
from sws.world import get_world

PRESETS = sorted(path.name for path in PRESET_DIR.glob("*.yaml"))
PAPER_BENCHMARKS = {"gsm8k", "math500", "minerva_math", "olympiadbench", "gaokao2023en", "amc23", "aime24", "aime25"}


def test_every_preset_is_found() -> None:
    assert {"demo.yaml", "quick.yaml", "math12k-qwen2.5-7b.yaml", "math-qwen2.5-1.5b-8gpu.yaml",
            "math-qwen2.5-1.5b-1gpu.yaml"} <= set(PRESETS)


@pytest.mark.parametrize("name", PRESETS)
def test_the_band_filter_samples_as_long_as_training_does(name: str) -> None:
    cfg = load_config(PRESET_DIR / name)
    assert cfg.filter_max_tokens == cfg.train.max_completion_length


def test_the_7b_preset_has_the_papers_values() -> None:
    cfg = load_config(PRESET_DIR / "math12k-qwen2.5-7b.yaml")
    assert cfg.train.learning_rate == 5e-7 and cfg.train.augmented_steps == 600
    assert cfg.train.online_filter == (0.125, 0.875)
    assert cfg.synthesize.levels == ["AMC12", "HMMT-Nov", "HMMT-Feb", "AIME", "USAJMO", "USAMO", "USOJMO", "USOMO"]
    assert cfg.roles.labeler.max_tokens == 32768
    entries = {entry.name: entry.k for entry in held_out.benchmark_entries(cfg)}
    assert set(entries) == PAPER_BENCHMARKS
    assert entries["aime24"] == entries["aime25"] == 32
    assert "base" in cfg.eval.checkpoints


def test_the_one_gpu_preset_keeps_the_papers_ratios_at_small_scale() -> None:
    small = load_config(PRESET_DIR / "math-qwen2.5-1.5b-1gpu.yaml")
    full = load_config(PRESET_DIR / "math12k-qwen2.5-7b.yaml")
    assert small.train.verl.n_gpus_per_node == 1 and "1.5B" in small.train.init_model
    for cfg in (small, full):
        assert cfg.train.batch_size / cfg.train.verl.mini_batch_size == 4
    assert small.train.augmented_steps / small.train.initial_steps == full.train.augmented_steps / full.train.initial_steps
    assert (small.train.learning_rate, small.train.online_filter, small.filter.band) == (
        full.train.learning_rate, full.train.online_filter, full.filter.band)
    # Seeds times the budget's expected yield (5 %): about three synthetic problems per seed in both.
    for cfg, seeds in ((small, small.prepare.max_problems), (full, 7474)):
        assert 2.9 <= cfg.synthesize.budget * 0.05 / seeds <= 3.1


@pytest.mark.parametrize("name", PRESETS)
def test_every_file_a_preset_points_into_the_package_exists(name: str) -> None:
    for reference in load_config(PRESET_DIR / name).synthesize.reference_files:
        assert Path(reference).is_file() and PRESET_DIR.parent in Path(reference).parents, reference


@pytest.mark.parametrize("given", ["demo", "demo.yaml"])
def test_a_preset_is_found_by_name_from_any_folder(given: str, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert pipeline_file(Path(given)) == PRESET_DIR / "demo.yaml"
    assert load_config(Path(given)).world == "arith"


def test_a_file_of_the_same_name_wins_over_the_preset(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "demo").write_text("world: math\n")
    assert pipeline_file(Path("demo")) == Path("demo")


def test_an_unknown_pipeline_is_one_error_listing_the_presets(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match="dmeo: pipeline file not found, nor a shipped preset") as raised:
        load_config(Path("dmeo"))
    assert all(name in str(raised.value) for name in ("demo", "quick", "math12k-qwen2.5-7b"))


def test_the_7b_presets_downloaded_benchmarks_are_read_from_the_folder_sws_runs_in(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("PWD", str(tmp_path))
    files = {entry.name: entry.file for entry in load_config(PRESET_DIR / "math12k-qwen2.5-7b.yaml").eval.benchmarks
             if not isinstance(entry, str) and entry.file}
    assert files == {name: str(tmp_path / "benchmarks" / f"{name}.jsonl")
                     for name in ("minerva_math", "olympiadbench", "gaokao2023en", "amc23")}


TINKER_COTRAINING = ["cotrain-qwen2.5-1.5b-tinker.yaml", "cotrain-qwen3-8b-tinker.yaml"]


@pytest.mark.parametrize("name", TINKER_COTRAINING)
def test_the_tinker_cotraining_presets_train_two_adapters_of_one_base_on_math(name: str, tmp_path: Path) -> None:
    cfg = load_config(PRESET_DIR / name)
    section = cfg.cotrain
    assert cfg.world == "math" and section.backend == "tinker" and section.only and "cotrained" in section.arms
    assert section.synthesizer.base_model == section.reasoner.base_model
    assert section.synthesizer.base_url == section.reasoner.base_url  # one server
    assert cfg.roles.labeler.engine in {"openai", "vllm"}
    # the Tinker learner trains only what was sampled at temperature 1
    assert section.synthesizer_temperature == section.reasoner_temperature == 1.0
    # the cards name a subject the run knows (the math world has no truth to name it)
    assert all(subject in section.synthesizer_system_prompt for subject in get_world("math").categories)
    result = CliRunner().invoke(app, ["run", name.removesuffix(".yaml"), "--run", str(tmp_path / "run"),
                                      "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "cotrain cotrained" in result.output and not (tmp_path / "run").exists()
    assert result.output.startswith("NOT RUN: this preset has not been run, neither on a GPU nor against a real "
                                    "Tinker server")
    tasks = section.reasoner_tasks or section.batch_size
    plan = " ".join(result.output.split())
    assert f"the reasoner on {tasks} tasks × {section.rollouts} rollouts = {tasks * section.rollouts} rollouts" in plan
    assert f"of {section.reasoner.base_model} on the hosted Tinker service" in plan and cfg.roles.labeler.model in plan


def test_the_8b_cotraining_preset_has_syncos_batch_and_lengths() -> None:
    section = load_config(PRESET_DIR / "cotrain-qwen3-8b-tinker.yaml").cotrain
    assert (section.batch_size, section.rollouts, section.steps) == (32, 4, 100)
    assert section.synthesizer_max_tokens == section.reasoner_max_tokens == 6144
    assert section.reasoner.base_model == "Qwen/Qwen3-8B"
