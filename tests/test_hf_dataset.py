from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest
import yaml
from typer.testing import CliRunner

from sws import hf_dataset, hf_folder
from sws.atomic_files import TEMP_PREFIX, write_parquet
from sws.cli import app
from sws.config import EngineConfig, PipelineConfig
from sws.errors import UserError
from sws.manifests import StageResult
from sws.runner import commit_stage
from sws.tables import table_path, write_rejected, write_table


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


def plant_selected(run: Path, **columns: pl.Series) -> None:
    """A `selected` table with extra columns of the given types (written as is, past the schema check)."""
    base = pl.DataFrame({"problem_id": ["p1"], "problem": ["Compute 1+2."], "answer": ["3"]})
    write_parquet(base.with_columns(**columns), table_path(run, "selected"))


def test_every_integer_width_date_and_nested_type_is_mapped_and_loads(run_dir: Path, tmp_path: Path,
                                                                      monkeypatch) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    from datasets import load_dataset

    plant_selected(run_dir, rank=pl.Series([3], dtype=pl.UInt32), small=pl.Series([1], dtype=pl.Int16),
                   share=pl.Series([0.5], dtype=pl.Float32), ids=pl.Series([[1, 2]], dtype=pl.List(pl.UInt8)),
                   at=pl.Series([datetime(2026, 1, 2)], dtype=pl.Datetime("us")))
    out = tmp_path / "dataset"
    hf_dataset.export(config(), run_dir, out)
    features = {f["name"]: f for f in header(out)["dataset_info"][2]["features"]}
    assert [features[name].get("dtype") for name in ("rank", "small", "share", "at")] == [
        "uint32", "int16", "float32", "timestamp[us]"]
    assert features["ids"]["sequence"] == "uint8"
    selected = load_dataset(str(out), "selected", split="train", cache_dir=str(tmp_path / "cache"))
    assert selected[0]["rank"] == 3 and selected[0]["ids"] == [1, 2]


def test_a_type_without_a_feature_is_one_line_naming_the_file_and_column(run_dir: Path, tmp_path: Path) -> None:
    plant_selected(run_dir, cost=pl.Series([Decimal("1.50")], dtype=pl.Decimal(10, 2)))
    out = tmp_path / "dataset"
    result = CliRunner().invoke(app, ["export", "hf", "--run", str(run_dir), "--out", str(out)])
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("error: ") and "selected.parquet" in line and "'cost'" in line
    assert not out.exists()


def test_a_folder_sws_did_not_write_is_refused_and_its_readme_kept(run_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "README.md").write_text("my own card\n")
    result = CliRunner().invoke(app, ["export", "hf", "--run", str(run_dir), "--out", str(out)])
    assert result.exit_code == 2 and "not written by `sws export hf`" in result.stderr
    assert [path.name for path in out.iterdir()] == ["README.md"]
    assert (out / "README.md").read_text() == "my own card\n"


def test_a_rerun_removes_its_own_stale_files_and_refuses_foreign_ones(run_dir: Path, tmp_path: Path) -> None:
    plant_selected(run_dir)
    out = tmp_path / "dataset"
    hf_dataset.export(config(), run_dir, out)
    assert (out / hf_dataset.data_file("selected")).exists()
    table_path(run_dir, "selected").unlink()
    (out / "augmented" / f"{TEMP_PREFIX}{hf_dataset.DATA_FILE}.abc123.tmp").write_bytes(b"killed export")
    assert hf_dataset.export(config(), run_dir, out) == {"augmented": 2, "synthetic": 1}
    assert sorted(path.relative_to(out).as_posix() for path in out.rglob("*") if path.is_file()) == [
        hf_folder.MARKER, "README.md", hf_dataset.data_file("augmented"), hf_dataset.data_file("synthetic")]

    (out / "notes.txt").write_text("private\n")
    with pytest.raises(UserError, match="notes.txt"):
        hf_dataset.export(config(), run_dir, out)
    assert (out / "notes.txt").read_text() == "private\n"
