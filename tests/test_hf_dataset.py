from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

from sws import hf_dataset
from sws.cli import app
from sws.config import EngineConfig, PipelineConfig
from sws.manifests import StageResult
from sws.runner import commit_stage
from sws.tables import write_rejected, write_table


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "run"
    write_table(run, "augmented", pl.DataFrame({
        "problem_id": ["p1", "syn-1"], "problem": ["Compute 1+2.", "Compute 11+12."], "answer": ["3", "23"],
        "category": ["addition", "addition"], "source": ["arith", "syn/arith-oracle"]}))
    write_table(run, "filtered", pl.DataFrame({
        "syn_id": ["syn-1"], "category": ["addition"], "concepts": [["carrying"]], "problem": ["Compute 11+12."],
        "answer": ["23"], "consistency": [1.0], "student_agreement": [None], "n": [8], "n_correct": [4],
        "accuracy": [0.5], "round": [0]}))
    write_rejected(run, "synthetic", pl.DataFrame({
        "problem": ["What is 2+2?"], "reject_reason": ["near_duplicate"],
        "reject_detail": ["reference:/data/bench.jsonl"]}))
    commit_stage(run, "label", config={}, inputs=[], outputs=[], body=lambda: StageResult("label", info={"funnel": {
        "step": "label", "in": 3, "kept": 1, "rejected": {"low_consistency": 2}}}))
    return run


def config() -> PipelineConfig:
    cfg = PipelineConfig(seed=7)
    cfg.roles.auditor = EngineConfig(engine="oracle", model="other-oracle")
    cfg.synthesize.reference_files = ["/data/bench.jsonl"]
    return cfg


def header(out: Path) -> dict:
    text = (out / "README.md").read_text()
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def test_the_folder_loads_with_datasets_and_the_card_names_every_config(run_dir: Path, tmp_path: Path,
                                                                      monkeypatch) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    from datasets import load_dataset

    out = tmp_path / "dataset"
    assert hf_dataset.export(config(), run_dir, out, license_id="mit") == {"augmented": 2, "synthetic": 1}

    card = header(out)
    assert card["license"] == "mit" and card["task_categories"]
    assert [c["config_name"] for c in card["configs"]] == ["augmented", "synthetic"]
    assert card["configs"][0]["default"] is True
    features = {f["name"]: f for f in card["dataset_info"][1]["features"]}
    assert features["concepts"] == {"name": "concepts", "sequence": "string"} and features["n"]["dtype"] == "int64"
    text = (out / "README.md").read_text()
    assert "- auditor: `other-oracle` (oracle engine)" in text and "- seed: 7" in text and "config hash" in text
    assert "| label | 3 | 1 | low_consistency 2 |" in text and "`bench.jsonl`: 1 removed" in text

    train = load_dataset(str(out), split="train", cache_dir=str(tmp_path / "cache"))
    assert train["problem_id"] == ["p1", "syn-1"]
    synthetic = load_dataset(str(out), "synthetic", split="train", cache_dir=str(tmp_path / "cache"))
    assert synthetic[0]["concepts"] == ["carrying"] and synthetic[0]["accuracy"] == 0.5


def test_push_without_a_token_is_one_error_line_and_writes_nothing(run_dir: Path, tmp_path: Path,
                                                                   monkeypatch) -> None:
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    out = tmp_path / "dataset"
    result = CliRunner().invoke(app, ["export", "hf", "--run", str(run_dir), "--out", str(out),
                                      "--push", "me/sws-demo"])
    assert result.exit_code == 2
    assert result.output.strip().startswith("error: --push: no Hugging Face token") and not out.exists()


def test_cli_writes_the_default_folder_and_an_empty_run_is_one_error_line(run_dir: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["export", "hf", "--run", str(run_dir)])
    assert result.exit_code == 0, result.output
    assert (run_dir / "hf" / "augmented" / hf_dataset.DATA_FILE).exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    result = CliRunner().invoke(app, ["export", "hf", "--run", str(empty)])
    assert result.exit_code == 2 and "no problem set to export" in result.output
