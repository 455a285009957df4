"""The package as a user installs it (a wheel, not this source tree) finds its shipped data and prompts."""

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_a_wheel_install_finds_the_math_preset_and_the_prompt_templates(tmp_path):
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(tmp_path / "wheel"), str(REPO)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    installed = tmp_path / "site"
    with zipfile.ZipFile(next((tmp_path / "wheel").glob("sws-*.whl"))) as wheel:
        wheel.extractall(installed)
    # The unpacked wheel comes first on the path, ahead of this checkout's editable install.
    env = {"PYTHONPATH": str(installed), "PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1"}
    run = subprocess.run([sys.executable, "-m", "sws", "prepare", "--preset", "math", "--run", str(tmp_path / "run")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    assert "7469 problems" in " ".join(run.stderr.split())
    where = subprocess.run([sys.executable, "-c", "import sws.prompts as p, sws.stages.prepare as s; "
                            "print(p.load_template('rate').name, s.DATA_DIR)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True)
    assert where.returncode == 0, where.stderr
    assert str(installed) in where.stdout and "rate" in where.stdout
