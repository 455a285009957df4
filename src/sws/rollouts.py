"""Rollout logs of other trainers, read into the `rollouts` table (`step, problem_id, n, n_correct`).

Two formats besides sws's own `rollouts.parquet`:
- verl `trainer.rollout_data_dir` dumps: one `<step>.jsonl` per training step, one line per sampled response with
  `input, output, gts, score, step` plus whatever the reward function returned (sws's returns `problem_id`,
  `acc`; verl 0.9.1 adds them only with `trainer.use_v1=False`, its v1 trainer writes a random `uid` instead).
  A response is correct when its `acc` is true, else when its `score` exceeds `CORRECT_SCORE`; one whose
  `graded` is false (sws's reward ran out of time grading it) counts in neither `n` nor `n_correct`, and a
  (step, problem) none of whose responses was graded gets no row. Its problem is its
  `problem_id`, else its `index`, else the problem whose text its prompt (`input`) contains and whose answer is
  its `gts`.
- the SwS reference trainer's `acc_records.json`: `{"train": {"<index>": [acc, ...]}}`, one accuracy per time the
  problem was rolled out, in training order; the record position is the step.

An `index` is a row position of problems.parquet, or the `index` of a seed file's row (`index` column, or verl's
`extra_info.index`, else its row position) whose problem is found in problems.parquet by id or text.
Steps and indices are whole numbers from 0 to `MAX_COUNT`; entries named `*.jsonl` that are not files are
skipped, and a dump with no response line is refused (`sws ingest` never replaces a log with an empty one).
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from fractions import Fraction
from pathlib import Path
from typing import Any

import polars as pl

from sws.errors import UserError
from sws.tables import SCHEMAS, read_records
from sws.verifier import normalize_answer

# verl rewards are 0/1, -1/1, or 1 plus small format bonuses; above one half means the answer was right.
CORRECT_SCORE = 0.5
# An acc_records accuracy is read as the fraction with the smallest denominator up to this (8 of 8 rollouts...).
MAX_ROLLOUTS_PER_RECORD = 1024
TEXT_FIELDS = ("problem", "question", "prompt")
_VERL_FIELDS = ("step", "problem_id", "index", "input", "gts", "acc", "score", "graded")
_ACC_SCHEMA = {"index": pl.Int64, "step": pl.Int64, "n": pl.Int64, "n_correct": pl.Int64}


# ---------------------------------------------------------------- matching prompts to problems


def normalise_text(text: str) -> str:
    return " ".join(text.split())


class PromptMatcher:
    """Finds the problem whose text a prompt contains (chat templates and instructions wrap the problem).

    Texts are compared with whitespace collapsed. A prompt equal to a problem matches it; otherwise the longest
    problem found inside the prompt at word boundaries wins (the later one on a tie, since few-shot examples come
    first). Given an answer, the match is the first problem of that text with that answer (spelled the same up to
    whitespace and `$`), else none. Candidates are found through an index of every problem's first `key_length`
    characters, so a prompt costs one dictionary lookup per character.
    """

    def __init__(
        self, problem_ids: list[str], problem_texts: list[str], answers: list[str] | None = None
    ) -> None:
        self._exact: dict[str, list[tuple[str, str | None]]] = {}
        for problem_id, text, answer in zip(
            problem_ids, problem_texts, answers if answers is not None else [None] * len(problem_ids), strict=True
        ):
            self._exact.setdefault(normalise_text(text), []).append((problem_id, answer))
        self._exact.pop("", None)
        self._key_length = min((len(text) for text in self._exact), default=1)
        self._by_prefix: dict[str, list[str]] = defaultdict(list)
        for text in self._exact:
            self._by_prefix[text[: self._key_length]].append(text)

    def match(self, prompt: str, answer: str | None = None) -> str | None:
        candidates = self._exact.get(self._problem_text(normalise_text(prompt)), [])
        if answer is None:
            return candidates[0][0] if candidates else None
        wanted = normalize_answer(answer)
        return next((problem_id for problem_id, gold in candidates
                     if gold is not None and normalize_answer(gold) == wanted), None)

    def _problem_text(self, prompt: str) -> str:
        """The (normalised) problem text the prompt contains; "" when none."""
        if prompt in self._exact:
            return prompt
        best = ""
        for start in range(len(prompt) - self._key_length + 1):
            for text in self._by_prefix.get(prompt[start : start + self._key_length], ()):
                if len(text) >= len(best) and prompt.startswith(text, start) and _at_word_boundaries(
                    prompt, start, start + len(text)
                ):
                    best = text
        return best


def _at_word_boundaries(prompt: str, start: int, end: int) -> bool:
    joined_before = start > 0 and prompt[start - 1].isalnum() and prompt[start].isalnum()
    joined_after = end < len(prompt) and prompt[end].isalnum() and prompt[end - 1].isalnum()
    return not (joined_before or joined_after)


def matcher_for(problems: pl.DataFrame) -> PromptMatcher:
    answers = problems["answer"].to_list() if "answer" in problems.columns else None
    return PromptMatcher(problems["problem_id"].to_list(), problems["problem"].to_list(), answers)


# ---------------------------------------------------------------- index → problem_id


def row_positions(problems: pl.DataFrame) -> pl.DataFrame:
    """`index, problem_id` with index = row position in problems.parquet."""
    return problems.select(pl.int_range(pl.len(), dtype=pl.Int64).alias("index"), "problem_id")


def seed_positions(seed_file: Path, problems: pl.DataFrame, problem_field: str | None = None) -> pl.DataFrame:
    """`index, problem_id` of a seed file's rows; rows whose problem is not in problems.parquet are left out.

    A seed row's problem is its `problem_id` if it has one, else the problem its text field (`problem_field`, or
    the first of problem/question/prompt; verl chat prompts use their last message) contains.
    """
    seed = read_records(seed_file)
    if seed.height == 0:
        raise UserError(f"{seed_file}: has no rows; pass the seed file the trainer read")
    index = _seed_index(seed, seed_file)
    if index.n_unique() != seed.height:
        raise UserError(f"{seed_file}: field 'index' repeats values; each row needs its own index")
    if "problem_id" in seed.columns:
        ids = seed["problem_id"].cast(pl.Utf8)
    else:
        fields = (problem_field,) if problem_field else TEXT_FIELDS
        field = next((name for name in fields if name in seed.columns), None)
        if field is None:
            raise UserError(f"{seed_file}: no problem text field ({' or '.join(fields)}); set prepare.problem_field "
                            "to the field holding the problem")
        matcher = matcher_for(problems)
        ids = pl.Series([_match_seed_text(value, matcher) for value in seed[field].to_list()], dtype=pl.Utf8)
    table = pl.DataFrame({"index": index, "problem_id": ids})
    return table.filter(pl.col("problem_id").is_in(problems["problem_id"].implode()))


def _seed_index(seed: pl.DataFrame, seed_file: Path) -> pl.Series:
    if "index" in seed.columns:
        column = seed["index"]
    elif "extra_info" in seed.columns and isinstance(seed.schema["extra_info"], pl.Struct) and "index" in [
        field.name for field in seed.schema["extra_info"].fields
    ]:
        column = seed["extra_info"].struct.field("index")
    else:
        return pl.Series("index", range(seed.height), dtype=pl.Int64)
    index = column.cast(pl.Int64, strict=False)
    if index.null_count():
        raise UserError(f"{seed_file}: field 'index' must be an integer in every row")
    return index.alias("index")


def _match_seed_text(value: Any, matcher: PromptMatcher) -> str | None:
    if isinstance(value, list):  # chat messages; the problem is in the last one
        value = value[-1].get("content") if value and isinstance(value[-1], dict) else None
    return matcher.match(value) if isinstance(value, str) else None


# ---------------------------------------------------------------- verl dumps


def read_verl_dumps(dump_dir: Path) -> pl.DataFrame:
    """Every response line of `<dump_dir>/*.jsonl`: `step, correct, graded, score` (a line without `graded` is
    graded) and `problem_id, index, input, gts` (nullable)."""
    dump_dir = Path(dump_dir)
    if not dump_dir.is_dir():
        raise UserError(f"{dump_dir}: not a directory; pass verl's trainer.rollout_data_dir")
    files = sorted(path for path in dump_dir.glob("*.jsonl") if path.is_file())
    if not files:
        raise UserError(f"{dump_dir}: holds no <step>.jsonl files; pass verl's trainer.rollout_data_dir")
    lines = pl.concat([_read_dump_file(path) for path in files])
    if lines.height == 0:
        raise UserError(f"{dump_dir}: its <step>.jsonl files hold no response line; pass the "
                        "trainer.rollout_data_dir of a run that trained")
    return lines


def _read_dump_file(path: Path) -> pl.DataFrame:
    try:  # every field as text: rewards return bools, ints or floats, and verl writes whatever they return
        raw = pl.read_ndjson(path, schema=dict.fromkeys(_VERL_FIELDS, pl.Utf8))
    except Exception as exc:  # polars raises several types for malformed JSON
        raise UserError(f"{path}: not valid JSONL ({str(exc).splitlines()[0][:120]}); re-dump it") from exc
    acc = pl.col("acc").str.to_lowercase().replace({"true": "1", "false": "0"}).cast(pl.Float64, strict=False)
    score = pl.col("score").cast(pl.Float64, strict=False)
    lines = raw.select(
        step=pl.col("step").cast(pl.Float64, strict=False),
        correct=pl.coalesce(acc, score) > CORRECT_SCORE,
        graded=(pl.col("graded").str.to_lowercase() != "false").fill_null(True),
        score=score,
        problem_id=pl.when(pl.col("problem_id") != "").then("problem_id"),
        index=pl.col("index").cast(pl.Float64, strict=False),
        input=pl.col("input"),
        gts=pl.col("gts"),
    )
    if lines["step"].null_count():
        raise UserError(f"{path}: {lines['step'].null_count()} lines lack a numeric 'step'; verl writes one on "
                        "every line, so re-dump them")
    if not _counts(lines["step"]):
        raise UserError(f"{path}: field 'step' must be an integer from 0 to {MAX_COUNT}")
    given_index = raw["index"].is_not_null() & (raw["index"] != "")
    if lines["index"].filter(given_index).null_count() or not _counts(lines["index"].drop_nulls()):
        raise UserError(f"{path}: field 'index' must be an integer from 0 to {MAX_COUNT}, where a line has one")
    if lines["correct"].null_count():
        raise UserError(f"{path}: {lines['correct'].null_count()} lines lack a numeric 'score' (or 'acc'); "
                        "re-dump them with the reward function's score")
    return lines.with_columns(pl.col("step").cast(pl.Int64), pl.col("index").cast(pl.Int64))


# Steps and dataset indices: far above any real run, and far inside every integer type they pass through.
MAX_COUNT = 2**31 - 1


def _counts(values: pl.Series) -> bool:
    """Whether every value is a whole number from 0 to MAX_COUNT."""
    return bool(((values == values.round()) & (values >= 0) & (values <= MAX_COUNT)).all())


def rollouts_from_verl_dumps(
    dump_dir: Path, problems: pl.DataFrame, index_ids: pl.DataFrame | None = None
) -> pl.DataFrame:
    """The rollouts table of a verl dump: one row per (step, problem) with its response and correct counts.

    `index_ids` (`index, problem_id`) resolves a line's `index`; by default the row positions of `problems`.
    Lines naming no known problem are a UserError that says how many there are.
    """
    lines = read_verl_dumps(dump_dir)
    index_ids = row_positions(problems) if index_ids is None else index_ids
    lines = lines.join(index_ids.rename({"problem_id": "id_of_index"}), on="index", how="left")
    by_text = pl.col("problem_id").is_null() & pl.col("index").is_null()
    prompts = lines.filter(by_text).select("input", "gts").unique().drop_nulls("input")
    matcher = matcher_for(problems) if prompts.height else None
    id_of_prompt = prompts.with_columns(id_of_prompt=pl.Series(
        [matcher.match(prompt, gts) for prompt, gts in prompts.iter_rows()] if matcher else [], dtype=pl.Utf8,
    ))
    lines = lines.join(id_of_prompt, on=["input", "gts"], how="left", nulls_equal=True).with_columns(
        pl.when(pl.col("problem_id").is_not_null())
        .then(pl.when(pl.col("problem_id").is_in(problems["problem_id"].implode())).then("problem_id"))
        .when(pl.col("index").is_not_null())
        .then("id_of_index")
        .otherwise("id_of_prompt")
        .alias("resolved_id")
    )
    unmatched = lines.filter(pl.col("resolved_id").is_null())
    if unmatched.height:
        first = unmatched.row(0, named=True)
        example = (f"problem_id '{first['problem_id']}'" if first["problem_id"] is not None
                   else f"index {first['index']}" if first["index"] is not None
                   else f"prompt '{normalise_text(first['input'] or '')[:60]}'"
                   + (f" with answer '{first['gts']}'" if first["gts"] is not None else ""))
        raise _unmatched(dump_dir, unmatched.height, lines.height, "response lines", example)
    return (
        lines.filter("graded")
        .group_by("step", "resolved_id")
        .agg(n=pl.len().cast(pl.Int64), n_correct=pl.col("correct").sum().cast(pl.Int64))
        .rename({"resolved_id": "problem_id"})
        .sort("step", "problem_id")
        .select(list(SCHEMAS["rollouts"]))
    )


# ---------------------------------------------------------------- SwS acc_records.json


def read_acc_records(path: Path) -> pl.DataFrame:
    """`index, step, n, n_correct` from `{"train": {"<index>": [acc, ...]}}`; step = record position.

    Each accuracy becomes the fraction with the smallest denominator (at most `MAX_ROLLOUTS_PER_RECORD`); all
    of a file's records share the least common one, so 0.375 and 0.5 from 8 rollouts read back as 3/8 and 4/8.
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UserError(f"{path}: not valid JSON ({exc}); pass the trainer's acc_records.json") from None
    records = data.get("train") if isinstance(data, dict) else None
    if not isinstance(records, dict) or not records:
        raise UserError(f"{path}: expected a non-empty 'train' mapping of index -> list of accuracies")
    rows: list[tuple[int, int, Fraction]] = []
    for key, accs in records.items():
        if not (key.isascii() and key.isdigit() and int(key) <= MAX_COUNT):
            raise UserError(f"{path}: key '{key}' under 'train' is not an integer index from 0 to {MAX_COUNT}")
        if not isinstance(accs, list) or not all(_is_accuracy(acc) for acc in accs):
            raise UserError(f"{path}: 'train.{key}' must be a list of accuracies between 0 and 1")
        rows.extend((int(key), step, Fraction(acc).limit_denominator(MAX_ROLLOUTS_PER_RECORD))
                    for step, acc in enumerate(accs))
    n = math.lcm(*(fraction.denominator for _, _, fraction in rows))
    if n > MAX_ROLLOUTS_PER_RECORD:  # no common rollout count; keep each record's own
        return pl.DataFrame([(index, step, f.denominator, f.numerator) for index, step, f in rows],
                            schema=_ACC_SCHEMA, orient="row")
    return pl.DataFrame([(index, step, n, int(f * n)) for index, step, f in rows], schema=_ACC_SCHEMA, orient="row")



def _is_accuracy(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and 0 <= value <= 1


def rollouts_from_acc_records(
    path: Path, problems: pl.DataFrame, index_ids: pl.DataFrame | None = None
) -> pl.DataFrame:
    """The rollouts table of an `acc_records.json`; indices resolve through `index_ids` (default: row positions)."""
    records = read_acc_records(path)
    index_ids = row_positions(problems) if index_ids is None else index_ids
    if records.height == 0:
        raise UserError(f"{path}: holds no accuracies; pass the acc_records.json of a run that trained")
    rollouts = records.join(index_ids, on="index", how="left")
    unmatched = rollouts.filter(pl.col("problem_id").is_null())
    if unmatched.height:
        raise _unmatched(path, unmatched.height, rollouts.height, "records", f"index {unmatched['index'][0]}")
    return rollouts.sort("step", "problem_id").select(list(SCHEMAS["rollouts"]))


def _unmatched(source: Path, n_unmatched: int, n_total: int, what: str, example: str) -> UserError:
    return UserError(
        f"{source}: {n_unmatched} of {n_total} {what} match no problem in problems.parquet (e.g. {example}); "
        "ingest against the problems the trainer used, or pass --seed-file for its index order"
    )
