"""The rollout log of a GRPO run: one row `(step, problem_id, n, n_correct, dropped)` per rollout group.

`dropped`: the online filter (`train.online_filter`) left the group out of the step's update; the row still
counts, so the log shows what each step rolled out and how many groups it dropped.

Rows are buffered in memory and written as a shard file before every checkpoint (and at the end), so each
checkpoint's rows are on disk before the checkpoint exists. A run resumed from the checkpoint of step N drops
the logged rows of later steps, which it rolls out again; so a kill at any moment loses or duplicates no row.
A shard is named after its first step and only ever replaced atomically, which keeps trimming crash-safe too.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sws.atomic_files import write_parquet
from sws.tables import SCHEMAS

SHARD_PREFIX = "from-step-"


class RolloutLog:
    """Append-only rollout rows of one training run, kept as Parquet shards in `shard_dir`."""

    def __init__(self, shard_dir: Path) -> None:
        self.shard_dir = Path(shard_dir)
        self._buffer: list[tuple[int, str, int, int, bool]] = []

    def record(self, step: int, problem_id: str, n: int, n_correct: int, dropped: bool = False) -> None:
        self._buffer.append((step, problem_id, n, n_correct, dropped))

    def flush(self) -> None:
        """Write the buffered rows as one new shard."""
        if not self._buffer:
            return
        rows = _frame(self._buffer)
        write_parquet(rows, self._shard_path(int(rows["step"].min())))
        self._buffer = []

    def truncate_after(self, step: int) -> None:
        """Forget every row of a step after `step`, on disk and in the buffer (resuming from that step)."""
        self._buffer = [row for row in self._buffer if row[0] <= step]
        for shard in self._shards():
            rows = pl.read_parquet(shard)
            kept = rows.filter(pl.col("step") <= step)
            if kept.height == 0:
                shard.unlink()
            elif kept.height < rows.height:
                write_parquet(kept, shard)

    def table(self) -> pl.DataFrame:
        """Every flushed row, in the order it was logged."""
        shards = self._shards()
        if not shards:
            return _frame([])
        # A shard written before the `dropped` column kept every group.
        return pl.concat([pl.read_parquet(shard) for shard in shards], how="diagonal").with_columns(
            pl.col("dropped").fill_null(False))

    def _shard_path(self, first_step: int) -> Path:
        return self.shard_dir / f"{SHARD_PREFIX}{first_step:08d}.parquet"

    def _shards(self) -> list[Path]:
        return sorted(self.shard_dir.glob(f"{SHARD_PREFIX}*.parquet"))


def _frame(rows: list[tuple[int, str, int, int, bool]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={**SCHEMAS["rollouts"], "dropped": pl.Boolean}, orient="row")


def dropped_per_step(rollouts: pl.DataFrame) -> pl.DataFrame:
    """`step, groups, dropped`: the rollout groups of each step and how many the online filter dropped."""
    return rollouts.group_by("step", maintain_order=True).agg(
        groups=pl.len().cast(pl.Int64), dropped=pl.col("dropped").sum().cast(pl.Int64)).sort("step")
