"""`sws mix`: the augmented training set, seed problems ∪ the synthetic problems that passed every filter ∪ the
problems `sws select` took from a pool, as `mix.sources` says (default both; a source whose stage has not run is
left out). With `select.arm` it also writes `selected_mix.parquet`, seed ∪ selected by the same rule: the
training set of the selected arm, beside augmented (then seed ∪ synthetic) and the seed-only baseline.

Synthetic rows keep their `syn_id` as `problem_id` and get `source = "syn/<generator model>"`; selected rows keep
their id and `sel/<pool>` source. A new problem whose text repeats a seed problem (or an earlier new one), or
whose id is already taken, goes to `augmented.rejected.parquet` with its reason, so every id in the augmented set
is unique.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sws import ui
from sws.artifacts import (
    SCHEMAS,
    StageResult,
    read_table,
    rejected_path,
    run_stage,
    table_path,
    write_rejected,
    write_table,
)
from sws.config import PipelineConfig
from sws.funnel import funnel_row
from sws.near_duplicates import problem_key
from sws.stage import Stage

STEP = "mix"
SELECTED_STEP = "mix_selected"

AUGMENTED_COLUMNS = list(SCHEMAS["augmented"])


def synthetic_source(cfg: PipelineConfig) -> str:
    return f"syn/{cfg.roles.generator.model}"


# The tables `mix.sources` names, each with the column that holds a row's id and its name in reject reasons.
ADDITIONS = {"synthetic": ("filtered", "syn_id"), "selected": ("selected", "problem_id")}


def mix(problems: pl.DataFrame, additions: dict[str, pl.DataFrame], synthetic_source: str
        ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return (augmented, rejected added rows with `reject_reason`): the seed problems, then each addition's rows
    that repeat neither a seed problem, nor an earlier row, nor a taken id (`problem_key` decides a repeat)."""
    seed = problems.select(AUGMENTED_COLUMNS)
    seen_texts = {problem_key(text) for text in seed["problem"]}
    seed_texts = set(seen_texts)
    seen_ids = set(seed["problem_id"])
    kept, rejected = [], []
    for kind, table in additions.items():
        id_column = ADDITIONS[kind][1]
        rejected_here = []
        for row in table.iter_rows(named=True):
            text = problem_key(row["problem"])
            if text in seed_texts:
                rejected_here.append({**row, "reject_reason": "duplicate_of_seed"})
            elif text in seen_texts:
                rejected_here.append({**row, "reject_reason": f"duplicate_{kind}"})
            elif row[id_column] in seen_ids:
                rejected_here.append({**row, "reject_reason": "duplicate_id"})
            else:
                seen_texts.add(text)
                seen_ids.add(row[id_column])
                kept.append({"problem_id": row[id_column], "problem": row["problem"], "answer": row["answer"],
                             "category": row["category"],
                             "source": synthetic_source if kind == "synthetic" else row["source"]})
        rejected.append(pl.DataFrame(rejected_here, schema={**table.schema, "reject_reason": pl.Utf8}))
    added = pl.DataFrame(kept, schema=SCHEMAS["augmented"])
    rejected_rows = (pl.concat(rejected, how="diagonal_relaxed") if rejected
                     else pl.DataFrame(schema={"reject_reason": pl.Utf8}))
    return pl.concat([seed, added]), rejected_rows


def run(cfg: PipelineConfig, run_dir: Path, force: bool = False) -> StageResult:
    run_dir = Path(run_dir)
    present = [kind for kind in cfg.mix.sources if table_path(run_dir, ADDITIONS[kind][0]).exists()]
    # With none present, reading the first names the command that writes it.
    return build(cfg, run_dir, STEP, "augmented", present or cfg.mix.sources[:1], force, funnel=True)


def run_selected(cfg: PipelineConfig, run_dir: Path, force: bool = False) -> StageResult:
    """The selected arm's training set (`select.arm`): seed ∪ selected, by the same rule as augmented."""
    return build(cfg, Path(run_dir), SELECTED_STEP, "selected_mix", ["selected"], force)


def build(cfg: PipelineConfig, run_dir: Path, step: str, table: str, kinds: list[str], force: bool,
          funnel: bool = False) -> StageResult:
    """Write `table` (+ its rejected sidecar): the seed problems with those of `kinds` added by `mix`."""
    source = synthetic_source(cfg)

    def body() -> StageResult:
        problems = read_table(run_dir, "problems")
        additions = {kind: read_table(run_dir, ADDITIONS[kind][0]) for kind in kinds}
        mixed, rejected = mix(problems, additions, source)
        write_table(run_dir, table, mixed)
        write_rejected(run_dir, table, rejected)
        n_added = mixed.height - problems.height
        ui.info(f"{step}: {problems.height} seed + {n_added} {' and '.join(kinds)} = {mixed.height} problems "
                f"({rejected.height} rejected as duplicates)")
        info = {"seed": problems.height, "added": n_added, "sources": kinds}
        if funnel:
            info["funnel"] = funnel_row(step, sum(frame.height for frame in additions.values()), n_added,
                                        rejected["reject_reason"]).as_info()
        return StageResult(step, rows={table: mixed.height, f"{table}.rejected": rejected.height}, info=info)

    return run_stage(
        run_dir, step, config={"source": source, "sources": kinds},
        inputs=[table_path(run_dir, "problems"), *(table_path(run_dir, ADDITIONS[kind][0]) for kind in kinds)],
        outputs=[table_path(run_dir, table), rejected_path(run_dir, table)], body=body, force=force,
    )


DECLARED = (
    Stage(STEP, "Build augmented.parquet: the seed problems plus the synthetic problems that passed every filter and "
          "the selected ones (mix.sources).", drive=run, reads=("problems", "filtered"), writes=("augmented",),
          section="mix", funnel=True, example="sws mix --run runs/demo"),
    Stage(SELECTED_STEP, "Build selected_mix.parquet, the selected arm's training set: the seed problems plus the "
          "selected ones (select.arm).", drive=run_selected, reads=("problems", "selected"), writes=("selected_mix",),
          section="select", title="mix selected", runs_when=lambda cfg: cfg.select.arm,
          example="sws mix_selected --run runs/demo"),
)
