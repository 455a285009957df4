"""Stage manifests: what decided a stage's outputs (settings hash, input fingerprints, versions, machine), read
back to skip a stage whose inputs and settings have not changed."""

from __future__ import annotations

import functools
import json
import os
import platform
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from sws import __version__, tokens, ui
from sws.atomic_files import fsync, write_json
from sws.fingerprints import config_hash, fingerprint
from sws.run_dir import RunDir


def package_versions() -> dict[str, str]:
    versions = {"sws": __version__}  # sws's own, whatever its distribution is named (sws-rlvr) or if a checkout
    for package in ("torch", "transformers", "trl", "vllm", "sentence-transformers", "math-verify", "polars"):
        try:
            versions[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            continue
    return versions


def cpu_model() -> str:
    """The CPU's model name: numbers from float kernels can differ between CPU models (vector width, BLAS paths)."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()

# Environment variables that choose torch's and MKL's CPU kernels. Unset, each takes the widest vector
# instructions of the CPU, so the same seed trains other weights on an AVX2 and on an AVX-512 machine.
KERNEL_SETTINGS = ("ATEN_CPU_CAPABILITY", "MKL_CBWR", "OMP_NUM_THREADS")


def cpu_kernels() -> str | None:
    """The vector instruction set torch's CPU kernels use in this process (e.g. AVX2, AVX512), if torch is installed."""
    try:
        import torch
    except ImportError:
        return None
    return torch.backends.cpu.get_cpu_capability()


@functools.cache
def float_environment() -> dict[str, Any]:
    """What decides float results besides the inputs and settings: torch's version, the vector kernels it uses,
    MKL's reproducibility mode and torch's thread count. Taken once, when the process first asks (a trainer
    pins the thread count for itself later on), so every stage of one command sees the same values."""
    try:
        import torch
    except ImportError:
        return {"torch": None}
    return {"torch": torch.__version__, "cpu_kernels": torch.backends.cpu.get_cpu_capability(),
            "mkl_cbwr": os.environ.get("MKL_CBWR"), "torch_threads": torch.get_num_threads()}


def environment() -> dict[str, Any]:
    """What a run's numbers depend on besides its config and seed: package versions, CPU and its kernels, Python."""
    return {"versions": package_versions(), "cpu": cpu_model(), "cpu_count": os.cpu_count(),
            "cpu_kernels": cpu_kernels(),
            "kernel_settings": {name: os.environ[name] for name in KERNEL_SETTINGS if name in os.environ},
            "python": platform.python_version(), "platform": platform.platform()}

# A manifest's fields and their types, as run_stage writes them.
MANIFEST_FIELDS: dict[str, type | tuple[type, ...]] = {
    "stage": str, "config_hash": str, "inputs": dict, "outputs": dict, "rows": dict, "info": dict,
    "seconds": (int, float),
}


def read_manifest(run_dir: Path, stage: str, partial: bool = False) -> dict[str, Any] | None:
    """The stage's manifest, or None when there is none or it is not one sws wrote (cut short, edited, another
    file): then the stage counts as not run, and runs again. A partial manifest (a step stopped at a spending
    cap) counts as not run too, unless `partial` asks for it."""
    path = RunDir(run_dir).manifest(stage)
    if not path.exists():
        return None
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        ui.info(f"{path}: not a manifest sws wrote ({type(exc).__name__}); the stage counts as not run")
        return None
    wrong = next((name for name, kind in MANIFEST_FIELDS.items()
                  if not isinstance(manifest, dict) or not isinstance(manifest.get(name), kind)), None)
    if wrong is not None:
        what = f"field '{wrong}' missing or mistyped" if isinstance(manifest, dict) else "not a JSON object"
        ui.info(f"{path}: not a manifest sws wrote ({what}); the stage counts as not run")
        return None
    return manifest if partial or not manifest.get("partial") else None


@dataclass
class StageResult:
    """What a stage did: rows written per output, whether it was skipped, stage-specific info (e.g. a funnel),
    the seconds and the model tokens per role (`sws.tokens`) its outputs took (when skipped: when they were made)."""

    stage: str
    rows: dict[str, int] = field(default_factory=dict)
    info: dict[str, Any] = field(default_factory=dict)
    skipped: bool = False
    seconds: float = 0.0
    tokens: dict[str, dict[str, int]] = field(default_factory=dict)


def fingerprints(run_dir: Path, paths: list[Path]) -> dict[str, str]:
    """`fingerprint` of each path, keyed by its path relative to the run (absolute when outside it)."""
    return {str(Path(p).relative_to(run_dir) if Path(p).is_relative_to(run_dir) else p): fingerprint(p)
            for p in paths}


def stale_reason(previous: dict[str, Any] | None, wanted_hash: str, inputs_fp: dict[str, str],
                 outputs_fp: dict[str, str]) -> str | None:
    """Why a stage with manifest `previous` must run (None: it is current, every output as it wrote it)."""
    if previous is None:
        return "not run yet"
    if previous.get("config_hash") != wanted_hash:
        return "its settings changed"
    recorded_inputs = previous.get("inputs", {})
    changed = [name for name in sorted({*inputs_fp, *recorded_inputs}) if inputs_fp.get(name) != recorded_inputs.get(name)]
    if changed:
        return f"input {changed[0]} changed"
    recorded_outputs = previous.get("outputs", {})
    for name, now in outputs_fp.items():
        if now == "missing":
            return f"output {name} is missing"
        if recorded_outputs.get(name) != now:
            return f"output {name} is not the file this stage wrote (changed, replaced or damaged)"
    return None


def current_manifest(run_dir: Path, stage: str, config: Any, inputs: list[Path],
                     outputs: list[Path]) -> dict[str, Any] | None:
    """The stage's manifest if it matches this config, these inputs and the outputs as it wrote them, else None."""
    previous = read_manifest(run_dir, stage)
    reason = stale_reason(previous, config_hash(config), fingerprints(run_dir, inputs),
                          fingerprints(run_dir, outputs))
    return previous if reason is None else None


def skipped_result(stage: str, manifest: dict[str, Any]) -> StageResult:
    """The result a current manifest records, for a stage skipped now; its tokens count towards an active cap."""
    used = manifest.get("tokens") or {}
    tokens.record_done(used)
    return StageResult(stage, rows=manifest.get("rows", {}), info=manifest.get("info", {}), skipped=True,
                       seconds=manifest.get("seconds", 0.0), tokens=used)


def remove_manifest(run_dir: Path, stage: str) -> None:
    path = RunDir(run_dir).manifest(stage)
    if path.exists():
        path.unlink()
        fsync(path.parent)


def restore_if_untouched(run_dir: Path, stage: str, previous: dict[str, Any] | None, outputs: list[Path]) -> None:
    """After a failed body: put back the old manifest if the outputs are still the ones it describes.

    Staged writes never reach the outputs, so a body that fails (bad input, say) normally leaves the old set,
    and the old manifest is still true of it. Only a folder output written in place can differ.
    """
    if previous is not None and previous.get("outputs") == fingerprints(run_dir, outputs):
        write_json(RunDir(run_dir).manifest(stage), previous)
