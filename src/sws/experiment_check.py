"""`sws compare` pools runs as seeds of one experiment: the same world and settings, another seed each.

Runs of other worlds or settings would mix two experiments into one mean, and a copy of one run given as a
second seed would shrink the standard error without a second measurement. Each is refused with one line.
The settings are the runs' `config.yaml`, less the seed and with each run's own folder written as `<run>`;
a run without one cannot be checked and is taken as it is.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from sws.config import PipelineConfig, load_config
from sws.errors import UserError
from sws.run_dir import RunDir

# The run's synthetic training set: written with the run's seed, so two seeds never give the same bytes.
SEEDED_TABLE = "augmented"
FIX = "compare runs of one pipeline that differ only in seed"


def check_seeds_of_one_experiment(runs: list[Path]) -> None:
    configs = [(run, load_config(RunDir(run).config, paths_relative_to_file=False))
               for run in runs if RunDir(run).config.is_file()]
    if not configs:
        return
    first, first_cfg = configs[0]
    settings = _settings(first, first_cfg)
    for run, cfg in configs[1:]:
        if cfg.world != first_cfg.world:
            raise UserError(f"{RunDir(run).config}: world '{cfg.world}', but {first} is of world "
                            f"'{first_cfg.world}'; {FIX}")
        field, value, expected = _first_difference(_settings(run, cfg), settings)
        if field is not None:
            raise UserError(f"{RunDir(run).config}: field '{field}' is {value!r}, but {expected!r} in {first}; "
                            f"{FIX}")
    seeds: dict[int, Path] = {}
    for run, cfg in configs:
        if cfg.seed in seeds:
            raise UserError(f"{RunDir(run).config}: seed {cfg.seed}, the same as {seeds[cfg.seed]}'s, so a copy "
                            f"of one measurement; {FIX}")
        seeds[cfg.seed] = run
    tables: dict[str, Path] = {}
    for run in runs:
        digest = _digest(RunDir(run).table(SEEDED_TABLE))
        if digest is not None and digest in tables:
            raise UserError(f"{RunDir(run).table(SEEDED_TABLE)}: the same bytes as in {tables[digest]}, so a copy "
                            f"of one run, not another seed; {FIX}")
        if digest is not None:
            tables[digest] = run


def _settings(run: Path, cfg: PipelineConfig) -> dict[str, Any]:
    data = cfg.model_dump(mode="json", exclude={"seed"})
    return _flat(data, "", (str(Path(run).resolve()), str(run)))


def _flat(value: Any, prefix: str, run_paths: tuple[str, ...]) -> dict[str, Any]:
    """Dotted field -> leaf value; a string inside the run's own folder has that folder as `<run>`."""
    if isinstance(value, dict):
        return {key: leaf for name, child in value.items()
                for key, leaf in _flat(child, f"{prefix}{name}.", run_paths).items()}
    if isinstance(value, str):
        for run_path in run_paths:
            if value == run_path or value.startswith(run_path.rstrip("/") + "/"):
                value = "<run>" + value[len(run_path.rstrip("/")):]
                break
    return {prefix.rstrip("."): value}


def _first_difference(these: dict[str, Any], those: dict[str, Any]) -> tuple[str | None, Any, Any]:
    for field in sorted(these.keys() | those.keys()):
        if these.get(field) != those.get(field):
            return field, these.get(field), those.get(field)
    return None, None, None


def _digest(path: Path) -> str | None:
    if not path.is_file():
        return None
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
