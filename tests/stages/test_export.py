from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

from sws import runner
from sws.cli import app
from sws.config import PipelineConfig
from sws.stages import export
from sws.tables import write_table
from sws.worlds.math.world import INSTRUCTION


def augmented() -> pl.DataFrame:
    return pl.DataFrame({
        "problem_id": ["p1", "p2", "syn-1"],
        "problem": ["Compute 1+2.", "Compute 7*8.", "Compute 11+12."],
        "answer": ["3", "56", "23"],
        "category": ["addition", "multiplication", "addition"],
        "source": ["arith", "arith", "syn/arith-oracle"],
    })


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    write_table(tmp_path, "augmented", augmented())
    return tmp_path


def test_verl_rows_follow_the_design_layout(run_dir: Path) -> None:
    runner.run(export.STAGE, PipelineConfig(world="arith"), run_dir)
    rows = pl.read_parquet(export.default_export_path(run_dir, "augmented")).to_dicts()

    assert [row["data_source"] for row in rows] == ["arith", "arith", "syn/arith-oracle"]
    assert {row["ability"] for row in rows} == {"math"}
    assert rows[2]["prompt"] == [{"role": "user", "content": "Compute 11+12.\n"}]
    assert [row["reward_model"] for row in rows] == [
        {"style": "rule", "ground_truth": answer} for answer in ("3", "56", "23")
    ]
    assert [row["extra_info"]["index"] for row in rows] == [0, 1, 2]
    assert [row["extra_info"]["problem_id"] for row in rows] == ["p1", "p2", "syn-1"]
    assert {row["extra_info"]["split"] for row in rows} == {"train"}


def test_math_world_prompts_carry_the_boxed_answer_instruction(run_dir: Path) -> None:
    out = run_dir / "elsewhere" / "train.parquet"
    runner.run(export.STAGE, PipelineConfig(world="math"), run_dir, out=out, split="test")
    first = pl.read_parquet(out).row(0, named=True)
    assert first["prompt"][0]["role"] == "user"
    assert first["prompt"][0]["content"].startswith("Compute 1+2.")
    assert first["prompt"][0]["content"].endswith(INSTRUCTION)
    assert first["extra_info"]["split"] == "test"


def test_cli_writes_the_requested_file(run_dir: Path) -> None:
    out = run_dir / "verl.parquet"
    result = CliRunner().invoke(app, ["export", "verl", "--run", str(run_dir), "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert pl.read_parquet(out).height == 3


def test_cli_missing_table_is_one_line_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["export", "verl", "--run", str(tmp_path)])
    assert result.exit_code == 2
    assert "sws mix" in result.output
    assert "Traceback" not in result.output
    assert not export.default_export_path(tmp_path, "augmented").exists()
