"""Category labeling (the SwS paper's appendix B.1): the `categorizer` role puts each problem in exactly one domain
of a fixed list and sums it up in one sentence.

`sws prepare` labels the seed set with it (`prepare.categorize`: true labels the rows without a category, "all"
every row), and `sws select` a pool without categories. The list is `prepare.categories`, else the world's
(MATH's seven subjects in the math world, the arith families' categories in the arith world).

A reply counts only when it ends with the line `END OF LABEL`, and above it has exactly one `Domain:` line naming
a domain of the list (names compared as `sws prepare` compares category names: `counting and probability` is
`Counting & Probability`) and exactly one non-empty `Summary:` line; lines before them (a model thinking aloud)
are allowed. A reply that does not count, or that was cut off at max_tokens, is asked again with a new seed up
to `prepare.categorize_retries` times; after that the row stays `uncategorized`, and the funnel row of the step
counts it. Each row's `category_source` says where its category came from: `input`, `model`, or `none`
(uncategorized).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import polars as pl

from sws.config import PipelineConfig, require_roles
from sws.engines.base import Completion
from sws.errors import UserError
from sws.executors import Executor
from sws.funnel import FunnelRow, funnel_row
from sws.llm_calls import request_seed, role_request
from sws.prompts import load_template
from sws.world import get_world

STEP = "categorize"
UNCATEGORIZED = "uncategorized"
END_MARKER = "END OF LABEL"
FROM_INPUT, FROM_MODEL, FROM_NONE = "input", "model", "none"
# Requests per shard of the executor: a crash loses at most one shard's replies (the request cache keeps them).
SHARD_SIZE = 256


def category_key(name: str) -> str:
    """What two spellings of one category share: lower-case letters and digits, without `and`."""
    return "".join(word for word in re.findall(r"[a-z0-9]+", name.lower()) if word != "and")


@dataclass(frozen=True)
class Label:
    category: str
    summary: str


def _field_lines(lines: list[str], name: str) -> list[str]:
    prefix = f"{name}:"
    return [line[len(prefix):].strip() for line in lines if line[:len(prefix)].lower() == prefix.lower()]


def parse_label(text: str, categories: list[str]) -> Label | None:
    """The label a reply holds (see the module docstring), or None."""
    lines = [line.strip() for line in text.strip().splitlines()]
    if not lines or lines[-1] != END_MARKER:
        return None
    domains, summaries = _field_lines(lines[:-1], "Domain"), _field_lines(lines[:-1], "Summary")
    if len(domains) != 1 or len(summaries) != 1 or not summaries[0]:
        return None
    matches = [category for category in categories if category_key(category) == category_key(domains[0])]
    return Label(matches[0], summaries[0]) if len(matches) == 1 else None


def category_list(cfg: PipelineConfig) -> list[str]:
    """The domains to label with: `prepare.categories`, else the world's category names."""
    listed = list(cfg.prepare.categories or get_world(cfg.world).categories)
    if not listed:
        raise UserError(f"prepare.categories: world '{cfg.world}' names no categories, so there is no list to "
                        "label with; set e.g. `prepare: {categories: [Algebra, Geometry, Number Theory]}`")
    return listed


def label_problems(cfg: PipelineConfig, executor: Executor, ids: list[str], problems: list[str], description: str
                   ) -> tuple[list[Label | None], list[Completion]]:
    """Per problem its label (None: no reply counted after the retries), and every completion it took."""
    require_roles(cfg, ["categorizer"], "the pipeline config")
    role = cfg.roles.categorizer
    categories = category_list(cfg)
    template = load_template("categorize", world=cfg.world)
    listing = "\n".join(f"- {category}" for category in categories)
    labels: list[Label | None] = [None] * len(problems)
    answered: list[Completion] = []
    for attempt in range(cfg.prepare.categorize_retries + 1):
        asked = [index for index, label in enumerate(labels) if label is None]
        if not asked:
            break
        retry = [f"retry {attempt}"] if attempt else []
        requests = [role_request(role, task=STEP, fields={"problem": problems[index], "categories": categories},
                                 text=template.render({"problem": problems[index], "categories": listing}),
                                 n=1, seed=request_seed(cfg.seed, STEP, ids[index], *retry))
                    for index in asked]
        label = description + (f", retry {attempt}: {len(asked)} problems" if attempt else "")
        for index, samples in zip(asked, executor.complete("categorizer", role, requests, SHARD_SIZE, label),
                                  strict=True):
            answered.extend(samples)
            labels[index] = None if samples[0].truncated else parse_label(samples[0].text, categories)
    return labels, answered


def with_category_source(table: pl.DataFrame) -> pl.DataFrame:
    """`category_source` (`input`, or `none` for `uncategorized`) and an empty `category_summary` added."""
    return table.with_columns(
        category_source=pl.when(pl.col("category") != UNCATEGORIZED).then(pl.lit(FROM_INPUT))
        .otherwise(pl.lit(FROM_NONE)),
        category_summary=pl.lit(None, dtype=pl.Utf8))


@dataclass
class Categorizer:
    """Labels the rows of a problem table that `prepare.categorize` asks for; keeps the funnel row of what it
    asked."""

    cfg: PipelineConfig
    executor: Executor
    description: str
    asked: int = 0
    labeled: int = 0
    completions: list[Completion] = field(default_factory=list)

    def __call__(self, table: pl.DataFrame) -> pl.DataFrame:
        """`table` (with `with_category_source`'s columns) with the rows `prepare.categorize` asks for labeled."""
        mode = self.cfg.prepare.categorize
        if not mode:
            return table
        table = table.with_row_index("_row")
        wanted = table if mode == "all" else table.filter(pl.col("category") == UNCATEGORIZED)
        labels, completions = label_problems(self.cfg, self.executor, wanted["problem_id"].to_list(),
                                             wanted["problem"].to_list(), self.description)
        self.asked += wanted.height
        self.labeled += sum(label is not None for label in labels)
        self.completions += completions
        answers = pl.DataFrame({
            "_row": wanted["_row"],
            "_category": [label.category if label else UNCATEGORIZED for label in labels],
            "_source": [FROM_MODEL if label else FROM_NONE for label in labels],
            "_summary": [label.summary if label else None for label in labels],
        }, schema={"_row": pl.UInt32, "_category": pl.Utf8, "_source": pl.Utf8, "_summary": pl.Utf8})
        joined = table.join(answers, on="_row", how="left", maintain_order="left")
        asked = pl.col("_source").is_not_null()
        return joined.with_columns(
            category=pl.when(asked).then("_category").otherwise("category"),
            category_source=pl.when(asked).then("_source").otherwise("category_source"),
            category_summary=pl.col("_summary"),
        ).drop("_row", "_category", "_source", "_summary")

    def funnel(self) -> FunnelRow:
        return funnel_row(STEP, self.asked, self.labeled, [UNCATEGORIZED] * (self.asked - self.labeled),
                          self.completions)
