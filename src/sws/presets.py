"""The pipelines sws ships (`src/sws/pipelines/*.yaml`, package data): `sws run demo` runs the shipped demo.yaml
from any folder, with or without a checkout. A path that exists always wins over a preset of the same name."""

from __future__ import annotations

from pathlib import Path

PRESET_DIR = Path(__file__).resolve().parent / "pipelines"


def preset_names() -> list[str]:
    return sorted(path.stem for path in PRESET_DIR.glob("*.yaml"))


def pipeline_file(path: Path) -> Path:
    """`path` itself if it exists or names a folder; else the shipped preset it names (`demo` or `demo.yaml`),
    if there is one; else `path` (for the caller's not-found error)."""
    if path.exists() or len(path.parts) != 1:
        return path
    name = path.name if path.name.endswith(".yaml") else f"{path.name}.yaml"
    preset = PRESET_DIR / name
    return preset if preset.is_file() else path
