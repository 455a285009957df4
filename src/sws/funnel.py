"""The synthesis funnel: per step, rows in, rows kept and rows rejected by reason.

Each synthesis step stores its row as `info["funnel"]` of its StageResult, which `run_stage` keeps in the
step's manifest; `read_funnel` collects them for the report, `funnel_table` renders them with rich.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.table import Table

from sws.artifacts import read_manifest


@dataclass(frozen=True)
class FunnelRow:
    step: str
    rows_in: int
    kept: int
    rejected: dict[str, int] = field(default_factory=dict)

    def as_info(self) -> dict[str, Any]:
        return {"step": self.step, "in": self.rows_in, "kept": self.kept, "rejected": dict(self.rejected)}

    @classmethod
    def from_info(cls, info: dict[str, Any]) -> FunnelRow:
        return cls(info["step"], int(info["in"]), int(info["kept"]), dict(info.get("rejected", {})))


def funnel_row(step: str, rows_in: int, kept: int, reasons: Iterable[str]) -> FunnelRow:
    counts = Counter(reasons)
    return FunnelRow(step, rows_in, kept, dict(sorted(counts.items(), key=lambda item: (-item[1], item[0]))))


def read_funnel(run_dir: Path, steps: Sequence[str]) -> list[FunnelRow]:
    """The funnel rows kept in the manifests of `steps` (steps never run are left out)."""
    rows = []
    for step in steps:
        manifest = read_manifest(run_dir, step)
        if manifest is not None and "funnel" in manifest.get("info", {}):
            rows.append(FunnelRow.from_info(manifest["info"]["funnel"]))
    return rows


def funnel_table(rows: Sequence[FunnelRow]) -> Table:
    table = Table(title="synthesis funnel")
    for column in ("step", "in", "kept", "rejected", "rejected by reason"):
        table.add_column(column, justify="left" if column in ("step", "rejected by reason") else "right")
    for row in rows:
        reasons = ", ".join(f"{reason} {count}" for reason, count in row.rejected.items()) or "-"
        table.add_row(row.step, str(row.rows_in), str(row.kept), str(sum(row.rejected.values())), reasons)
    return table
