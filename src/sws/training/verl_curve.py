"""The training curve of a verl run: per step, the mean and spread of the rollout rewards, read from the rollout
dumps, and the policy-gradient loss, read from verl's console log (`step:<n> - ... - actor/pg_loss:<x> - ...`,
one line per step; under Ray prefixed with the actor's name). A step the log has no loss for gets null.
With the online filter (verl's `algorithm.filter_groups`), `groups_dropped` is the groups it evicted in the step
(`training/filter_groups/evicted_samples`, counted per group); 0 where the log names none.
"""

from __future__ import annotations

import re

import polars as pl

_STEP_LINE = re.compile(r"\bstep:(\d+) - ")
_PG_LOSS = re.compile(r" - actor/pg_loss:(\S+)")
_GROUPS_DROPPED = re.compile(r" - training/filter_groups/evicted_samples:(\S+)")


def console_steps(log_text: str) -> dict[int, str]:
    """The console metrics line of every step in a log (the last one when a resumed run repeats a step)."""
    return {int(match.group(1)): line for line in log_text.splitlines() if (match := _STEP_LINE.search(line))}


def console_metric(log_text: str, pattern: re.Pattern[str]) -> dict[int, float]:
    values: dict[int, float] = {}
    for step, line in console_steps(log_text).items():
        match = pattern.search(line)
        if match:
            try:
                values[step] = float(match.group(1))
            except ValueError:
                continue
    return values


def console_losses(log_text: str) -> dict[int, float]:
    return console_metric(log_text, _PG_LOSS)


def training_curve(dump_lines: pl.DataFrame, log_text: str) -> pl.DataFrame:
    """`step, reward, reward_std, loss, groups_dropped` from dump lines (`step, score`) and the console log's text."""
    losses = console_losses(log_text)
    dropped = {step: int(count) for step, count in console_metric(log_text, _GROUPS_DROPPED).items()}
    rewards = (
        dump_lines.group_by("step")
        .agg(reward=pl.col("score").mean(), reward_std=pl.col("score").std())
        .sort("step")
    )
    return rewards.with_columns(
        loss=pl.col("step").replace_strict(losses, default=None, return_dtype=pl.Float64),
        groups_dropped=pl.col("step").replace_strict(dropped, default=0, return_dtype=pl.Int64),
    ).select(step=pl.col("step").cast(pl.Int64), reward="reward", reward_std="reward_std", loss="loss",
             groups_dropped="groups_dropped")
