"""`sws prepare`: a seed problem set (JSON list, JSONL or Parquet) normalised into `problems.parquet`.

Output columns: `problem_id, problem, answer, category, source`, then the input's other fields unchanged (a field
whose name is taken by an output column is kept as `original_<name>`). Rows with an empty problem, a missing answer,
a category outside `prepare.categories`, a repeated problem (`sws.near_duplicates.problem_key`: case, spacing and
closing punctuation ignored, the rule generate and mix use too) or a repeated id go to `problems.rejected.parquet`
with a `reject_reason`; of repeats, the first copy stays.

- Records are read as `sws.records` says (fields, presets, category spellings, ids, sources).
- Categories: with `prepare.categorize` (true: rows without one; "all": every row) the `categorizer` role labels them with one category of `prepare.categories` (None: the world's list) and a
  one-sentence summary (`sws.categorize`); every row carries `category_source` (`input`, `model` or `none`) and
  `category_summary`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from sws import ui
from sws.categorize import (
    Categorizer,
    categorize_prompt,
    category_list,
)
from sws.config import PipelineConfig, PrepareConfig, require_roles
from sws.errors import UserError
from sws.funnel import FunnelRow
from sws.records import (
    DATA_DIR,
    DEFAULT_CATEGORY,
    PRESETS,
    detect_preset,
    normalize_records,
)
from sws.run_dir import RunDir
from sws.runner import StageContext, StageOutput
from sws.stage import Stage
from sws.tables import read_records

STEP = "prepare"
# The public math sets shipped inside the package (see its data/README.md), so an installed sws finds them.
# ---------------------------------------------------------------- the stage


def seed_file(settings: PrepareConfig) -> Path:
    """`prepare.input`, or with only a preset named, the file of that preset shipped in the package."""
    if settings.preset is not None and settings.preset not in PRESETS:
        raise UserError(f"prepare.preset: unknown preset '{settings.preset}'; use one of {', '.join(PRESETS)} "
                        "or leave it out and name the fields")
    if settings.input is not None:
        return Path(settings.input)
    if settings.preset is not None:
        return DATA_DIR / PRESETS[settings.preset].file
    raise UserError("prepare.input: no seed set given; pass --input FILE (a JSON list, JSONL or Parquet file) "
                    f"or --preset NAME for a shipped set ({', '.join(PRESETS)})")


def seed_input(cfg: PipelineConfig, run: RunDir) -> list[Path]:
    """The seed file, which must exist: the stage's one input besides its settings."""
    path = seed_file(cfg.prepare)
    if not path.is_file():
        raise UserError(f"{path}: file not found; pass --input (prepare.input) a JSON list, JSONL or Parquet file")
    return [path]


def settings(cfg: PipelineConfig, options: dict) -> dict:
    return {"prepare": cfg.prepare.model_dump(mode="json"), **categorizer_identity(cfg)}


def prepare(context: StageContext) -> StageOutput:
    """The seed file normalised into problems (a seeded sample of `prepare.max_problems`) and rejected rows."""
    cfg = context.cfg
    chosen = cfg.prepare
    input_path = seed_file(chosen)
    records = read_records(input_path)
    preset = chosen.preset or detect_preset(input_path, records.columns)
    categorizer = Categorizer(cfg, context.executor, "label categories") if chosen.categorize else None
    problems, rejected = normalize_records(records, input_path, chosen, preset, categorizer)
    if chosen.max_problems is not None and problems.height > chosen.max_problems:
        problems = problems.with_row_index("_row").sample(chosen.max_problems, seed=cfg.seed).sort("_row").drop("_row")
    reasons = dict(Counter(rejected["reject_reason"].to_list()))
    n_categories = problems["category"].n_unique()
    ui.info(f"{STEP}: {problems.height} problems in {n_categories} "
            f"{'category' if n_categories == 1 else 'categories'} from {input_path}"
            f"{f' (preset {preset})' if preset else ''} -> problems.parquet; {rejected.height} rejected"
            + (f" ({', '.join(f'{n} {reason}' for reason, n in reasons.items())})" if reasons else ""))
    funnel: FunnelRow | bool = False
    if categorizer is not None:
        funnel = categorizer.funnel()
        ui.info(f"{STEP}: the categorizer labeled {funnel.kept} of {funnel.rows_in} problems"
                + (f"; {funnel.rows_in - funnel.kept} stay {DEFAULT_CATEGORY}" if funnel.kept < funnel.rows_in
                   else ""))
    return StageOutput(tables={"problems": problems}, rejected={"problems": rejected}, funnel=funnel,
                       info={"preset": preset, "n_categories": n_categories, "rejected": reasons})


def categorizer_identity(cfg: PipelineConfig) -> dict:
    """What decides the labels when `prepare.categorize` is on (part of a manifest's config)."""
    if not cfg.prepare.categorize:
        return {}
    require_roles(cfg, ["categorizer"], "the pipeline config")
    return {"seed": cfg.seed, "categorizer": cfg.roles.categorizer.model_dump(mode="json"),
            "categories": category_list(cfg), "categorize_prompt": categorize_prompt(cfg).digest}


STAGE = Stage(
    STEP, "Normalise a seed problem set into problems.parquet (duplicates and unanswered rows rejected with a "
    "reason); with prepare.categorize, the categorizer labels rows without a category.", prepare,
    writes=("problems",), rejects=("problems",), settings=settings, input_files=seed_input, section="prepare",
    funnel=True, command="sws prepare")
DECLARED = (STAGE,)
