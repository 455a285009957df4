"""Seed records normalised into problems: the fields to read, one spelling per category, stable ids, and the
rows to reject with a reason; and the presets of the data files shipped in the package (MATH, MATH-500, AIME, GSM8K).

- Fields: `prepare.problem_field` / `answer_field` / `category_field` / `id_field`, else the preset's, else the
  first present of `GENERIC_FIELDS`. A preset (`PRESETS`) is taken from `prepare.preset`, or guessed from the file
  name when the file has the preset's fields.
- Categories: one spelling per category. Names are compared by their letters and digits, ignoring case, `&`,
  `and`, spaces, `_` and `-` (`Counting_Probability` = `counting and probability`); the spelling is the one in
  `prepare.categories` when given, else a world's category name (MATH subjects, arith), else the most common
  spelling. Rows without a category field get `uncategorized`.
- `problem_id`: the id field's value when present, else a hash of the problem text (whitespace collapsed), so
  the same problem gets the same id in every run.
- `source`: the input's `source` field when present, else the preset name, else the file's stem.

`sws prepare` reads a seed file through it; held-out benchmark files and decontamination read theirs the same way.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from sws import text_hygiene
from sws.categorize import UNCATEGORIZED, Categorizer, category_key, with_category_source
from sws.commuted import commuted_key
from sws.config import PrepareConfig
from sws.errors import UserError
from sws.near_duplicates import problem_key
from sws.rollouts import TEXT_FIELDS, normalise_text
from sws.tables import SCHEMAS, read_records
from sws.world import all_worlds

DATA_DIR = Path(__file__).resolve().parent / "data"
DEFAULT_CATEGORY = UNCATEGORIZED
GENERIC_FIELDS = {
    "problem": TEXT_FIELDS,
    "answer": ("answer", "expected_answer", "final_answer"),
    "category": ("category", "type", "subject"),
    "id": ("problem_id", "id", "unique_id"),
}
OUTPUT_COLUMNS = tuple(SCHEMAS["problems"])
ID_HASH_CHARS = 16

EMPTY_PROBLEM = "empty_problem"
MISSING_ANSWER = "missing_answer"
CATEGORY_NOT_ALLOWED = "category_not_allowed"
DUPLICATE_ID = "duplicate_id"
DUPLICATE_PROBLEM = "duplicate_problem"


# ---------------------------------------------------------------- presets


def _gsm8k_final_answer(solution: str) -> str | None:
    """The number after GSM8K's `####`, without thousands separators."""
    match = re.search(r"####\s*(.+?)\s*$", solution)
    return match.group(1).replace(",", "") if match else None


def _math500_subject(unique_id: str) -> str | None:
    """`test/precalculus/807.json` -> `precalculus`."""
    parts = unique_id.split("/")
    return parts[1] if len(parts) >= 3 else None


@dataclass(frozen=True)
class Preset:
    """The field layout of a known file; `*_from` turn a field's raw value into the answer or category."""

    file: str
    problem: str
    answer: str
    category: str | None = None
    id: str | None = None
    answer_from: Callable[[str], str | None] | None = None
    category_from: Callable[[str], str | None] | None = None


PRESETS: dict[str, Preset] = {
    "math": Preset("math_train.json", "problem", "answer", category="type"),
    "math500": Preset("math500.json", "problem", "answer", category="unique_id", id="unique_id",
                      category_from=_math500_subject),
    "aime24": Preset("aime24.json", "problem", "answer"),
    "aime25": Preset("aime25.jsonl", "problem", "expected_answer", id="id"),
    "gsm8k": Preset("gsm8k_test.jsonl", "question", "answer", answer_from=_gsm8k_final_answer),
}
# When the answer is extracted from a longer field (GSM8K's worked solution), the whole field is kept as this.
SOLUTION_COLUMN = "solution"


def detect_preset(path: Path, columns: list[str]) -> str | None:
    """The preset a file name suggests (`math500.json` -> math500), if the file has that preset's fields."""
    name = re.sub(r"[^a-z0-9]", "", Path(path).stem.lower())
    rules = (("math500", "math500"), ("aime2024", "aime24"), ("aime24", "aime24"), ("aime2025", "aime25"),
             ("aime25", "aime25"), ("gsm8k", "gsm8k"))
    guess = next((preset for marker, preset in rules if marker in name), "math" if name.startswith("math") else None)
    if guess is None:
        return None
    preset = PRESETS[guess]
    needed = [field for field in (preset.problem, preset.answer, preset.category, preset.id) if field]
    return guess if all(field in columns for field in needed) else None


# ---------------------------------------------------------------- categories


def canonical_categories(names: list[str], allowed: list[str] | None = None) -> dict[str, str]:
    """Map each distinct spelling in `names` to its category's one spelling (see the module docstring).

    With `allowed`, spellings of other categories are left out of the map.
    """
    known = [category for world in all_worlds() for category in world.categories]
    preferred = {category_key(name): name for name in (allowed if allowed is not None else known)}
    spellings_by_key: dict[str, Counter[str]] = {}
    for name in names:
        spellings_by_key.setdefault(category_key(name), Counter())[name] += 1
    mapping = {}
    for key, spellings in spellings_by_key.items():
        if allowed is not None and key not in preferred:
            continue
        most_common = min(spellings, key=lambda spelling: (-spellings[spelling], spelling))
        canonical = preferred.get(key, most_common)
        mapping.update(dict.fromkeys(spellings, canonical))
    return mapping


# ---------------------------------------------------------------- normalising a table


@dataclass(frozen=True)
class Fields:
    problem: str
    answer: str
    category: str | None
    id: str | None


def resolve_fields(settings: PrepareConfig, preset: Preset | None, columns: list[str], source: Path) -> Fields:
    """The input field for each role: an explicit option, else the preset's, else the first generic name present."""
    chosen = {}
    for role, option in (("problem", "problem_field"), ("answer", "answer_field"), ("category", "category_field"),
                         ("id", "id_field")):
        explicit = getattr(settings, option) or (getattr(preset, role) if preset else None)
        if explicit is not None:
            if explicit not in columns:
                raise UserError(f"{source}: no field '{explicit}' ({role}); fields are {', '.join(columns)}; "
                                f"pass --{option.replace('_', '-')} NAME")
            chosen[role] = explicit
            continue
        chosen[role] = next((name for name in GENERIC_FIELDS[role] if name in columns), None)
        if chosen[role] is None and role in ("problem", "answer"):
            raise UserError(f"{source}: no {role} field (looked for {', '.join(GENERIC_FIELDS[role])}); fields are "
                            f"{', '.join(columns)}; pass --{option.replace('_', '-')} NAME")
    return Fields(**chosen)


_TEXT_LIKE = (pl.Utf8, pl.Null)


def _text_column(records: pl.DataFrame, field: str, role: str, source: Path, numbers_ok: bool) -> pl.Series:
    """A field as strings; numbers become their decimal text when `numbers_ok`, anything else is a UserError."""
    column = records[field]
    if column.dtype in _TEXT_LIKE or (numbers_ok and column.dtype.is_numeric()):
        return column.cast(pl.Utf8)
    expected = "text or numbers" if numbers_ok else "text"
    raise UserError(f"{source}: field '{field}' ({role}) holds {column.dtype} values, expected {expected}; "
                    f"fix the file or pick another field with --{role}-field")


def _transformed(values: pl.Series, transform: Callable[[str], str | None] | None) -> pl.Series:
    if transform is None:
        return values
    return pl.Series(values.name, [None if value is None else transform(value) for value in values.to_list()],
                     dtype=pl.Utf8)


def _blank(values: pl.Series) -> pl.Series:
    return (values.is_null() | (values.str.strip_chars() == "")).fill_null(True)


def _hostile(values: pl.Series) -> pl.Series:
    """Texts with a control or bidi character (`sws.text_hygiene`): pool and seed problems as generated ones."""
    return values.map_elements(lambda text: text_hygiene.hostile_character(text) is not None,
                               return_dtype=pl.Boolean, skip_nulls=False).fill_null(False)


def content_id(problem: str) -> str:
    """A stable id from the problem text (whitespace collapsed; commuted operands, `8+47` / `47+8`, in one order)."""
    return hashlib.sha256(commuted_key(normalise_text(problem)).encode()).hexdigest()[:ID_HASH_CHARS]


def normalize_records(
    records: pl.DataFrame, source: Path, settings: PrepareConfig, preset_name: str | None,
    categorize: Categorizer | None = None,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(problems, rejected) from a raw table; UserError for a table that cannot be a seed set.

    Every row gets `category_source` and `category_summary` (`sws.categorize`); `categorize` labels the kept rows
    `prepare.categorize` asks for (a row without a category is then kept whatever `prepare.categories` says)."""
    if records.height == 0:
        raise UserError(f"{source}: has no rows; pass a seed set with at least one problem")
    preset = PRESETS[preset_name] if preset_name else None
    fields = resolve_fields(settings, preset, records.columns, source)
    table = _problem_table(records, fields, preset, source, default_source=preset_name or Path(source).stem)
    spellings = canonical_categories(table["category"].unique().to_list(), settings.categories)
    table = table.with_columns(pl.col("category").replace_strict(spellings, default=pl.col("category")))
    labeling = settings.categorize if categorize else False
    # Labeled rows get a category of the list, so only rows that keep their input category are checked.
    allowed = (set(table["category"]) if labeling == "all" else
               set(spellings.values()) | ({DEFAULT_CATEGORY} if labeling else set()))
    kept, rejected = split_rejected(with_category_source(table), allowed_categories=allowed)
    if kept.height == 0:
        counts = ", ".join(f"{n} {reason}" for reason, n in Counter(rejected["reject_reason"].to_list()).items())
        raise UserError(f"{source}: none of its {records.height} rows is usable ({counts}); check the field options "
                        "and prepare.categories")
    return (categorize(kept) if categorize else kept), rejected


def _problem_table(
    records: pl.DataFrame, fields: Fields, preset: Preset | None, source: Path, default_source: str
) -> pl.DataFrame:
    """The output columns (category not yet canonical) followed by the input's other fields."""
    problem = _text_column(records, fields.problem, "problem", source, numbers_ok=False)
    raw_answer = _text_column(records, fields.answer, "answer", source, numbers_ok=True)
    answer_from = preset.answer_from if preset and fields.answer == preset.answer else None
    answer = _transformed(raw_answer, answer_from).str.strip_chars()
    if fields.category is None:
        category = pl.Series([DEFAULT_CATEGORY] * records.height, dtype=pl.Utf8)
    else:
        category = _text_column(records, fields.category, "category", source, numbers_ok=True)
        if preset and fields.category == preset.category:
            category = _transformed(category, preset.category_from)
        category = category.str.strip_chars().fill_null(DEFAULT_CATEGORY)
    given_ids = (_text_column(records, fields.id, "id", source, numbers_ok=True).to_list() if fields.id
                 else [None] * records.height)
    problem_id = [given or content_id(text or "") for given, text in zip(given_ids, problem.to_list(), strict=True)]
    has_source = "source" in records.columns and records.schema["source"] in _TEXT_LIKE
    origin = records["source"].cast(pl.Utf8) if has_source else pl.Series([None] * records.height, dtype=pl.Utf8)

    consumed = {fields.problem, fields.answer, fields.category, fields.id, "source" if has_source else None}
    extras = records.select([name for name in records.columns if name not in consumed])
    extras = extras.rename({name: f"original_{name}" for name in extras.columns if name in OUTPUT_COLUMNS})
    table = pl.DataFrame({
        "problem_id": pl.Series(problem_id, dtype=pl.Utf8), "problem": problem, "answer": answer,
        "category": category, "source": origin.fill_null(default_source),
    }).hstack(extras)
    if answer_from is not None and SOLUTION_COLUMN not in table.columns:
        table = table.with_columns(raw_answer.alias(SOLUTION_COLUMN))
    return table


def split_rejected(table: pl.DataFrame, allowed_categories: set[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Rows that pass every check, and the others with the first check they failed as `reject_reason`.

    Checks run in order on the rows still kept, so a duplicate is a repeat of a row that is itself kept.
    """
    checks: list[tuple[str, Callable[[pl.DataFrame], pl.Series]]] = [
        (EMPTY_PROBLEM, lambda rows: _blank(rows["problem"])),
        (MISSING_ANSWER, lambda rows: _blank(rows["answer"])),
        (text_hygiene.REJECT_REASON, lambda rows: _hostile(rows["problem"]) | _hostile(rows["answer"])),
        (CATEGORY_NOT_ALLOWED, lambda rows: ~rows["category"].is_in(list(allowed_categories))),
        (DUPLICATE_PROBLEM, lambda rows: ~rows["problem"].map_elements(problem_key, return_dtype=pl.Utf8)
         .is_first_distinct()),
        (DUPLICATE_ID, lambda rows: ~rows["problem_id"].is_first_distinct()),
    ]
    kept = table
    rejected = []
    for reason, failed in checks:
        failing = failed(kept)
        rejected.append(kept.filter(failing).with_columns(pl.lit(reason).alias("reject_reason")))
        kept = kept.filter(~failing)
    return kept, pl.concat(rejected)


# ---------------------------------------------------------------- shipped benchmark files


def load_preset_benchmark(name: str) -> pl.DataFrame:
    """A file shipped in data/ (by preset name), normalised as `sws prepare --preset NAME` would; rejects dropped."""
    if name not in PRESETS:
        raise UserError(f"unknown benchmark '{name}'; use one of {', '.join(PRESETS)}")
    path = DATA_DIR / PRESETS[name].file
    problems, _ = normalize_records(read_records(path), path, PrepareConfig(), name)
    return problems
