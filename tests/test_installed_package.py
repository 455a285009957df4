"""The package as a user installs it: a wheel built from this checkout, installed into a fresh virtualenv, run from
a folder outside the checkout. It finds its presets, shipped data and prompts, carries its licence, and declares
dependency bounds that hold the versions the tests run with."""

import os
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from importlib.metadata import version
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement

from sws import __version__

REPO = Path(__file__).resolve().parents[1]
DISTRIBUTION = "sws_rlvr"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(out), str(REPO)], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr
    return next(out.glob(f"{DISTRIBUTION}-{__version__}-*.whl"))


@pytest.fixture(scope="module")
def venv(wheel: Path, tmp_path_factory) -> Path:
    """A fresh virtualenv with the wheel installed. Nothing is downloaded: the wheel goes in without its
    dependencies, which the venv sees from this interpreter's site-packages (added as plain paths, so that the
    checkout's own editable install there stays out of it)."""
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    python = root / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                               capture_output=True, text=True, check=True).stdout.strip())
    dependencies = dict.fromkeys([sysconfig.get_path("purelib"), sysconfig.get_path("platlib")])
    (site / "dependencies.pth").write_text("\n".join(dependencies) + "\n")
    installed = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                                "--no-index", str(wheel)], env=without_the_checkout(), capture_output=True, text=True)
    assert installed.returncode == 0, installed.stderr
    return root


def without_the_checkout() -> dict[str, str]:
    """This environment less PYTHONPATH, which may name the checkout's src/ (and the build's egg-info there)."""
    return {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}


def run_in(folder: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**without_the_checkout(), "HF_HUB_OFFLINE": "1", "PWD": str(folder)}
    return subprocess.run(args, cwd=folder, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_the_wheel_carries_the_presets_the_licence_and_the_distribution_name(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata = archive.read(f"{DISTRIBUTION}-{__version__}.dist-info/METADATA").decode()
    assert {f"sws/pipelines/{preset}.yaml" for preset in ("demo", "quick", "math12k-qwen2.5-7b")} <= names
    assert f"{DISTRIBUTION}-{__version__}.dist-info/licenses/LICENSE" in names
    assert "Name: sws-rlvr" in metadata and "License-Expression: Apache-2.0" in metadata
    assert "Provides-Extra: embedder" in metadata
    assert "Requires-Dist: trl<1.17,>=1.16" in metadata


@pytest.mark.slow
def test_the_installed_command_prints_its_version_and_runs_a_preset_by_name_outside_the_checkout(
        venv: Path, tmp_path: Path) -> None:
    sws = str(venv / "bin" / "sws")
    where = run_in(tmp_path, str(venv / "bin" / "python"), "-c", "import sws; print(sws.__file__)")
    assert where.returncode == 0 and where.stdout.startswith(str(venv)), where.stdout + where.stderr

    version = run_in(tmp_path, sws, "--version")
    assert version.returncode == 0 and version.stdout.strip() == f"sws {__version__}", version.stderr

    planned = run_in(tmp_path, sws, "run", "demo", "--run", "demo-run", "--dry-run")
    assert planned.returncode == 0, planned.stderr
    assert "report" in planned.stdout and not (tmp_path / "demo-run").exists()

    prepared = run_in(tmp_path, sws, "prepare", "--config", "math-qwen2.5-1.5b-8gpu", "--run", "run")
    assert prepared.returncode == 0, prepared.stderr
    assert "7469 problems" in " ".join(prepared.stderr.split())
    references = yaml.safe_load((tmp_path / "run" / "config.yaml").read_text())["synthesize"]["reference_files"]
    assert references and all(Path(path).is_file() and path.startswith(str(venv)) for path in references)


@pytest.mark.slow
def test_the_installed_package_finds_its_prompt_templates(venv: Path, tmp_path: Path) -> None:
    where = run_in(tmp_path, str(venv / "bin" / "python"), "-c",
                   "import sws.prompts as p; print(p.load_template('rate').name)")
    assert where.returncode == 0, where.stderr
    assert "rate" in where.stdout


def test_the_environment_the_tests_run_in_is_within_the_declared_dependency_bounds() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    declared = [Requirement(text) for text in [*project["dependencies"], *project["optional-dependencies"]["embedder"]]]
    outside = {requirement.name: version(requirement.name) for requirement in declared
               if not requirement.specifier.contains(version(requirement.name), prereleases=True)}
    assert not outside, f"installed outside pyproject.toml's bounds: {outside}"
