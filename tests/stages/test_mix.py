from pathlib import Path

import polars as pl
import pytest

from sws import runner
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.manifests import read_manifest
from sws.stages import mix
from sws.tables import read_table, rejected_path, table_path, write_table


def seed_problems() -> pl.DataFrame:
    return pl.DataFrame({
        "problem_id": ["p1", "p2", "p3"],
        "problem": ["Compute 1+2.", "Compute 7*8.", "Compute 9-4."],
        "answer": ["3", "56", "5"],
        "category": ["addition", "multiplication", "subtraction"],
        "source": ["arith"] * 3,
    })


def filtered_problems(texts: list[str], ids: list[str] | None = None) -> pl.DataFrame:
    ids = ids or [f"syn-{i}" for i in range(len(texts))]
    return pl.DataFrame({
        "syn_id": ids, "category": ["addition"] * len(texts), "problem": texts,
        "answer": [str(10 + i) for i in range(len(texts))], "n": [8] * len(texts),
        "n_correct": [4] * len(texts), "accuracy": [0.5] * len(texts),
        "level": ["hard"] * len(texts), "round": [0] * len(texts),
    })


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    write_table(tmp_path, "problems", seed_problems())
    return tmp_path


def test_augmented_is_seed_plus_synthetic_with_source_marked(run_dir: Path) -> None:
    write_table(run_dir, "filtered", filtered_problems(["Compute 11+12.", "Compute 13+14."]))
    cfg = PipelineConfig()
    result = runner.run(mix.STAGE, cfg, run_dir)

    augmented = read_table(run_dir, "augmented")
    assert augmented.height == 5
    assert augmented["problem_id"].n_unique() == 5
    synthetic = augmented.filter(pl.col("source").str.starts_with("syn/"))
    assert synthetic["problem_id"].to_list() == ["syn-0", "syn-1"]
    assert synthetic["answer"].to_list() == ["10", "11"]
    assert set(synthetic["source"]) == {f"syn/{cfg.roles.generator.model}"}
    assert augmented.filter(pl.col("source") == "arith").equals(seed_problems())
    assert result.info["added"] == 2


def test_duplicates_of_seed_or_of_each_other_go_to_the_sidecar(run_dir: Path) -> None:
    texts = ["compute  1+2.", "Compute 20+21.", "Compute 20 + 21.", "COMPUTE 20+21."]
    write_table(run_dir, "filtered", filtered_problems(texts, ["s1", "s2", "s3", "p2"]))
    runner.run(mix.STAGE, PipelineConfig(), run_dir)

    augmented = read_table(run_dir, "augmented")
    # One rule for a duplicate everywhere (`problem_key`): case, spacing around symbols, closing punctuation.
    assert augmented.filter(pl.col("source") != "arith")["problem_id"].to_list() == ["s2"]
    rejected = pl.read_parquet(rejected_path(run_dir, "augmented"))
    assert dict(zip(rejected["syn_id"], rejected["reject_reason"], strict=True)) == {
        "s1": "duplicate_of_seed", "s3": "duplicate_synthetic", "p2": "duplicate_synthetic",
    }
    assert "level" in rejected.columns
    funnel = read_manifest(run_dir, "mix")["info"]["funnel"]
    assert funnel == {"step": "mix", "in": 4, "kept": 1,
                      "rejected": {"duplicate_synthetic": 2, "duplicate_of_seed": 1}}


def test_a_taken_id_is_rejected(run_dir: Path) -> None:
    write_table(run_dir, "filtered", filtered_problems(["Compute 30+31."], ["p1"]))
    runner.run(mix.STAGE, PipelineConfig(), run_dir)
    rejected = pl.read_parquet(rejected_path(run_dir, "augmented"))
    assert rejected["reject_reason"].to_list() == ["duplicate_id"]
    assert read_table(run_dir, "augmented").height == 3


def test_rerun_is_skipped_until_an_input_changes(run_dir: Path) -> None:
    write_table(run_dir, "filtered", filtered_problems(["Compute 11+12."]))
    assert not runner.run(mix.STAGE, PipelineConfig(), run_dir).skipped
    assert runner.run(mix.STAGE, PipelineConfig(), run_dir).skipped
    write_table(run_dir, "filtered", filtered_problems(["Compute 11+12.", "Compute 40+41."]))
    assert not runner.run(mix.STAGE, PipelineConfig(), run_dir).skipped
    assert read_table(run_dir, "augmented").height == 5


def test_missing_filtered_names_the_command_and_writes_nothing(run_dir: Path) -> None:
    with pytest.raises(UserError, match="sws filter"):
        runner.run(mix.STAGE, PipelineConfig(), run_dir)
    assert not table_path(run_dir, "augmented").exists()
    assert read_manifest(run_dir, "mix") is None


def test_a_dose_keeps_that_many_drawn_at_random_and_rejects_the_rest_as_beyond_dose(run_dir: Path) -> None:
    texts = [f"Compute {i}+{i + 50}." for i in range(10, 30)]
    write_table(run_dir, "filtered", filtered_problems(texts))
    config = PipelineConfig()
    config.mix.sources = ["synthetic"]
    config.mix.dose = 6
    runner.run(mix.STAGE, config, run_dir)
    augmented = read_table(run_dir, "augmented")
    added = augmented.filter(pl.col("source").str.starts_with("syn/"))
    rejected = pl.read_parquet(rejected_path(run_dir, "augmented"))
    assert added.height == 6 and rejected["reject_reason"].to_list() == ["beyond_dose"] * 14
    assert set(added["problem_id"]) | set(rejected["syn_id"]) == {f"syn-{i}" for i in range(20)}
    # the kept ones are a draw, not the first six; the same seed draws the same, another seed others
    assert added["problem_id"].to_list() != [f"syn-{i}" for i in range(6)]
    config.seed = 1
    runner.run(mix.STAGE, config, run_dir)
    assert set(read_table(run_dir, "augmented")["problem_id"]) != set(augmented["problem_id"])


def test_a_dose_larger_than_what_passed_adds_everything(run_dir: Path) -> None:
    write_table(run_dir, "filtered", filtered_problems(["Compute 11+12.", "Compute 13+14."]))
    config = PipelineConfig()
    config.mix.sources = ["synthetic"]
    config.mix.dose = 6
    runner.run(mix.STAGE, config, run_dir)
    assert read_table(run_dir, "augmented").height == 3 + 2
