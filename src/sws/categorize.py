"""Category labeling (the SwS paper's appendix B.1): the `categorizer` role puts each problem in exactly one domain
of a fixed list and sums it up in one sentence.

`sws prepare` labels the seed set with it (`prepare.categorize`: true labels the rows without a category, "all"
every row), and `sws select` a pool without categories. The list is `prepare.categories`, else the world's
(MATH's seven subjects in the math world, the arith families' categories in the arith world). The prompt gives
each domain with the one line the world describes it with (`World.category_descriptions`), and with
`prepare.categorize_examples` an example problem of each with the reply it expects.

A reply counts when a careful reader would take a label from it: exactly one `Domain:` line naming one domain
of the list, and a non-empty `Summary:`. Lines before them (a model thinking aloud), Markdown dress
(`**Domain:** Algebra`) and the closing `END OF LABEL` some models add are allowed. A domain names a listed one
when it is that name up to case, punctuation and `&`/`and` (`counting and probability`), or an unambiguous
short form of it (`Probability`: the one listed domain whose words include it), or either followed by a colon
and a description. A reply cut off at max_tokens never counts (its finish reason says so). A reply that does not
count is asked again with a new seed (at temperature 0, the role's `retry_temperature`: at 0 a new seed gets the
same reply) up to `prepare.categorize_retries` times; after that the row stays `uncategorized`. The funnel row
of the step counts the rows left uncategorized and the replies set aside, by reason. Each row's
`category_source` says where its category came from: `input`, `model`, or `none` (uncategorized).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass, field

import polars as pl

from sws import text_hygiene
from sws.config import PipelineConfig, require_roles
from sws.engines.base import Completion
from sws.errors import UserError
from sws.executors import Executor
from sws.funnel import FunnelRow, funnel_row
from sws.llm_calls import attempt_role, request_seed, role_request
from sws.prompts import PromptTemplate, load_template
from sws.world import get_world

STEP = "categorize"
UNCATEGORIZED = "uncategorized"
FROM_INPUT, FROM_MODEL, FROM_NONE = "input", "model", "none"
# Why a reply gives no label.
TRUNCATED, NO_DOMAIN, TWO_DOMAINS, UNLISTED = "truncated", "no_domain", "two_domains", "unlisted_domain"
NO_SUMMARY, TWO_SUMMARIES = "no_summary", "two_summaries"
# The line some models close their label with; it ends a summary that runs over several lines.
END_MARKER = "END OF LABEL"
# Requests per shard of the executor: a crash loses at most one shard's replies (the request cache keeps them).
SHARD_SIZE = 256
# A field line, also in Markdown dress: "Domain: Algebra", "**Domain:** Algebra", "- Summary: ...".
_FIELD = re.compile(r"^[\s*_#>-]*(?P<name>summary|domain)[\s*_]*:(?P<value>.*)$", re.IGNORECASE)
# Where a domain's name ends when a reply copies its description too ("Algebra: linear equations ...").
_DESCRIPTION = re.compile(r"\s*(?::|\s[-—–]\s)")


def _words(name: str) -> list[str]:
    return [word for word in re.findall(r"[a-z0-9]+", name.lower()) if word != "and"]


def category_key(name: str) -> str:
    """What two spellings of one category share: lower-case letters and digits, without `and`."""
    return "".join(_words(name))


def listed_domain(domain: str, categories: list[str]) -> str | None:
    """The listed category a reply's domain names (see the module docstring), or None."""
    for name in (domain, _DESCRIPTION.split(domain, maxsplit=1)[0]):
        words = set(_words(name))
        same = [category for category in categories if category_key(category) == category_key(name)]
        short = [category for category in categories if words and words <= set(_words(category))]
        for matches in (same, short):
            if len(matches) == 1:
                return matches[0]
    return None


@dataclass(frozen=True)
class Label:
    category: str
    summary: str


def _fields(lines: list[str]) -> dict[int, tuple[str, str]]:
    """Line index -> (field, value) of the `Summary:` and `Domain:` lines, and ("end", "") of the end marker."""
    fields = {}
    for index, line in enumerate(lines):
        if match := _FIELD.match(line):
            fields[index] = (match["name"].lower(), match["value"].strip(" *_"))
        elif line.strip(" *_") == END_MARKER:
            fields[index] = ("end", "")
    return fields


def _summary(lines: list[str], start: int, fields: dict[int, tuple[str, str]]) -> str:
    """The summary that starts at line `start`: its line's text, continued by the lines below it up to the next
    field or, once it has text, a blank line."""
    text = [fields[start][1]]
    for index in range(start + 1, len(lines)):
        if index in fields or (not lines[index] and any(text)):
            break
        text.append(lines[index])
    return " ".join(text_hygiene.plain_text(" ".join(text)).split()).strip(" *_")


def parse_label(text: str, categories: list[str]) -> Label | str:
    """The label a reply holds (see the module docstring), or why it holds none."""
    lines = [line.strip() for line in text.splitlines()]
    fields = _fields(lines)
    domains = [value for name, value in fields.values() if name == "domain"]
    summaries = [index for index, (name, _) in fields.items() if name == "summary"]
    if not domains or not domains[0]:
        return NO_DOMAIN
    if len(domains) > 1:
        return TWO_DOMAINS
    category = listed_domain(domains[0], categories)
    if category is None:
        return UNLISTED
    if len(summaries) > 1:
        return TWO_SUMMARIES
    summary = _summary(lines, summaries[0], fields) if summaries else ""
    return Label(category, summary) if summary else NO_SUMMARY


def read_label(completion: Completion, categories: list[str]) -> Label | str:
    """The label a completion holds, or why it holds none (`truncated` when it was cut off at max_tokens)."""
    return TRUNCATED if completion.truncated else parse_label(completion.text, categories)


def category_list(cfg: PipelineConfig) -> list[str]:
    """The domains to label with: `prepare.categories`, else the world's category names."""
    listed = list(cfg.prepare.categories or get_world(cfg.world).categories)
    if not listed:
        raise UserError(f"prepare.categories: world '{cfg.world}' names no categories, so there is no list to "
                        "label with; set e.g. `prepare: {categories: [Algebra, Geometry, Number Theory]}`")
    return listed


@dataclass(frozen=True)
class CategorizePrompt:
    """The categorize template with the list of domains (each with its description) and the few-shot block."""

    template: PromptTemplate
    listing: str
    examples: str

    def render(self, problem: str) -> str:
        return self.template.render({"problem": problem, "categories": self.listing, "examples": self.examples})

    @property
    def digest(self) -> str:
        """Hash of everything the prompt shows but the problem, so a manifest goes stale when any of it changes."""
        text = "\x1f".join([self.template.digest, self.listing, self.examples])
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _examples_block(cfg: PipelineConfig, categories: list[str]) -> str:
    """The few-shot block: the world's example problem of each listed category with the reply it expects."""
    shown = {category_key(name): example for name, example in get_world(cfg.world).category_examples.items()}
    examples = [(category, shown[category_key(category)]) for category in categories if category_key(category) in shown]
    if not examples:
        raise UserError(f"prepare.categorize_examples: world '{cfg.world}' has no example problem for any of the "
                        f"categories {', '.join(categories)}; set it to false")
    replies = [f"Problem:\n{example.problem}\n\nSummary: {example.summary}\nDomain: {category}"
               for category, example in examples]
    return "Examples, each a problem and its reply:\n\n" + "\n\n".join(replies) + "\n\nThe problem to sort:\n\n"


def categorize_prompt(cfg: PipelineConfig) -> CategorizePrompt:
    """The prompt for `category_list(cfg)`: descriptions and examples from the world, matched by `category_key`."""
    categories = category_list(cfg)
    described = {category_key(name): text for name, text in get_world(cfg.world).category_descriptions.items()}
    listing = "\n".join(f"- {category}: {described[category_key(category)]}"
                         if category_key(category) in described else f"- {category}" for category in categories)
    examples = _examples_block(cfg, categories) if cfg.prepare.categorize_examples else ""
    return CategorizePrompt(load_template("categorize", world=cfg.world), listing, examples)


@dataclass
class Labeling:
    """Per problem its label (None: no reply counted after the retries), every completion it took, and why the
    replies that did not count were set aside."""

    labels: list[Label | None]
    completions: list[Completion]
    rejected_replies: list[str]


def label_problems(cfg: PipelineConfig, executor: Executor, ids: list[str], problems: list[str], description: str
                   ) -> Labeling:
    """Each problem's label, asked again for the replies that do not count (see the module docstring)."""
    require_roles(cfg, ["categorizer"], "the pipeline config")
    role = cfg.roles.categorizer
    categories = category_list(cfg)
    prompt = categorize_prompt(cfg)
    labeling = Labeling([None] * len(problems), [], [])
    for attempt in range(cfg.prepare.categorize_retries + 1):
        asked = [index for index, label in enumerate(labeling.labels) if label is None]
        if not asked:
            break
        retry = [f"retry {attempt}"] if attempt else []
        requests = [role_request(attempt_role(role, attempt), task=STEP,
                                 fields={"problem": problems[index], "categories": categories},
                                 text=prompt.render(problems[index]), n=1,
                                 seed=request_seed(cfg.seed, STEP, ids[index], *retry))
                    for index in asked]
        label = description + (f", retry {attempt}: {len(asked)} problems" if attempt else "")
        for index, samples in zip(asked, executor.complete("categorizer", role, requests, SHARD_SIZE, label),
                                  strict=True):
            labeling.completions.extend(samples)
            read = read_label(samples[0], categories)
            if isinstance(read, Label):
                labeling.labels[index] = read
            else:
                labeling.rejected_replies.append(read)
    return labeling


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
    rejected_replies: Counter[str] = field(default_factory=Counter)

    def __call__(self, table: pl.DataFrame) -> pl.DataFrame:
        """`table` (with `with_category_source`'s columns) with the rows `prepare.categorize` asks for labeled."""
        mode = self.cfg.prepare.categorize
        if not mode:
            return table
        table = table.with_row_index("_row")
        wanted = table if mode == "all" else table.filter(pl.col("category") == UNCATEGORIZED)
        labeling = label_problems(self.cfg, self.executor, wanted["problem_id"].to_list(),
                                  wanted["problem"].to_list(), self.description)
        labels = labeling.labels
        self.asked += wanted.height
        self.labeled += sum(label is not None for label in labels)
        self.completions += labeling.completions
        self.rejected_replies.update(labeling.rejected_replies)
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
                          self.completions, self.rejected_replies.elements())
