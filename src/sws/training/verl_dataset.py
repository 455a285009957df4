"""verl's RL dataset layout, shared by `sws export verl` and the verl trainer.

Each row: `data_source` (the problem's `source`, so verl's metrics break down by seed versus synthetic origin),
`prompt` (the policy prompt as chat messages), `ability`, `reward_model = {style: "rule", ground_truth}` and
`extra_info = {index, problem_id, split, category, source}`; `index` is the row position. verl passes
`extra_info` to the reward function, whose `problem_id` then lands in verl's rollout dumps.
"""

from __future__ import annotations

import polars as pl

from sws.world import get_world

VERL_SCHEMA: dict[str, pl.DataType] = {
    "data_source": pl.Utf8,
    "prompt": pl.List(pl.Struct({"role": pl.Utf8, "content": pl.Utf8})),
    "ability": pl.Utf8,
    "reward_model": pl.Struct({"style": pl.Utf8, "ground_truth": pl.Utf8}),
    "extra_info": pl.Struct(
        {"index": pl.Int64, "problem_id": pl.Utf8, "split": pl.Utf8, "category": pl.Utf8, "source": pl.Utf8}
    ),
}


def chat_messages(problem: str, world: str) -> list[dict[str, str]]:
    """The policy's prompt as chat messages; a raw-text prompt becomes one user message."""
    fields = get_world(world).policy_prompt(problem)
    if "messages" in fields:
        return [dict(message) for message in fields["messages"]]
    return [{"role": "user", "content": fields["prompt"]}]


def verl_table(problems: pl.DataFrame, world: str, split: str) -> pl.DataFrame:
    """Convert rows with `problem_id, problem, answer, category, source` into verl's dataset layout."""
    rows = [
        {
            "data_source": row["source"],
            "prompt": chat_messages(row["problem"], world),
            "ability": "math",
            "reward_model": {"style": "rule", "ground_truth": row["answer"]},
            "extra_info": {
                "index": index, "problem_id": row["problem_id"], "split": split,
                "category": row["category"], "source": row["source"],
            },
        }
        for index, row in enumerate(problems.iter_rows(named=True))
    ]
    return pl.DataFrame(rows, schema=VERL_SCHEMA)
