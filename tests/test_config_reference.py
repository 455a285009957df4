"""docs/configuration.md is the reference `make docs` writes from the pydantic models, and says every field."""

import subprocess
import sys
from pathlib import Path

from sws.config import PipelineConfig, TrainConfig

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "config_reference.py"
REFERENCE = REPO / "docs" / "configuration.md"


def test_the_configuration_reference_is_up_to_date():
    checked = subprocess.run([sys.executable, str(SCRIPT), "--check"], capture_output=True, text=True)

    assert checked.returncode == 0, checked.stderr


def test_the_reference_has_every_section_and_field_with_its_default():
    text = REFERENCE.read_text()

    for section in PipelineConfig.model_fields:
        assert f"| `{section}` |" in text
    for name in TrainConfig.model_fields:
        assert f"| `{name}` |" in text
    assert "## `train.verl`" in text
    assert "| `report_to` | 'none' \\| 'tensorboard' \\| 'wandb' \\| 'mlflow' | `\"none\"` | Experiment tracker" in text


def test_every_field_has_a_description():
    undescribed = [line for line in REFERENCE.read_text().splitlines() if line.startswith("| `") and
                   line.endswith("|  |")]

    assert not undescribed, "add a comment above these fields in src/sws/config.py, then `make docs`"


def test_a_stale_reference_is_refused_with_the_command_that_regenerates_it(tmp_path):
    stale = tmp_path / "configuration.md"
    stale.write_text("# old\n")

    checked = subprocess.run([sys.executable, str(SCRIPT), "--check", str(stale)], capture_output=True, text=True)

    assert checked.returncode == 1
    assert checked.stderr.strip() == f"{stale}: stale; regenerate it with `make docs`"
