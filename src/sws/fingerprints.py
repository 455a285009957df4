"""Content hashes that decide whether a stage's inputs or settings changed: of a file or folder, and of settings."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def fingerprint(path: Path) -> str:
    """Content hash of a file; for a directory, of its files' relative names, sizes and modification times."""
    path = Path(path)
    if not path.exists():
        return "missing"
    digest = hashlib.sha256()
    if path.is_dir():
        for child in sorted(p for p in path.rglob("*") if p.is_file()):
            stat = child.stat()
            digest.update(f"{child.relative_to(path)}:{stat.st_size}:{stat.st_mtime_ns}\n".encode())
    else:
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


def config_hash(config: Any) -> str:
    if hasattr(config, "model_dump"):
        config = config.model_dump(mode="json")
    return hashlib.sha256(json.dumps(config, sort_keys=True, default=str).encode()).hexdigest()[:16]
