"""Synthesis filters against the arith world's ground truth: precision and recall of every filter.

Runs extract → combine → generate → rate → label with the noisy oracle teacher on an arith run whose weak
problems are the medium and hard problems of three categories, then grades every problem each filter saw with
`sws.worlds.arith.solve`:
- each pre-filter reason against the defect kind the oracle injected (precision: rejected for that reason and
  truly that defect; recall: share of that defect rejected for that reason);
- the judges (rate) and the labeler's self-consistency (label) against "the problem is defective, or its
  majority answer is wrong";
and the baseline is the unfiltered generator output: the defect share and answer accuracy before and after.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import polars as pl

from sws import ui
from sws.config import EngineConfig, PipelineConfig
from sws.stages import synthesize
from sws.tables import read_parquet, read_table, rejected_path, write_table
from sws.worlds.arith import DEFECT_KINDS, generate_problems, solve

NOISE = {kind: 0.08 for kind in DEFECT_KINDS}
JUDGE_ERROR = 0.1
LABELER_ERROR = 0.2
WEAK_CATEGORIES = ("multiplication", "remainders", "multi_step")
PREFILTERED = ("multi_part", "multiple_choice", "proof", "true_false", "answer_leak")


def identified_run(run_dir: Path, n_problems: int = 600) -> None:
    """What `sws identify` would leave: problems, weakness (medium/hard of WEAK_CATEGORIES weak), categories."""
    arith = generate_problems(n_problems, seed=0)
    problems = pl.DataFrame({
        "problem_id": [f"p{index}" for index in range(len(arith))], "problem": [p.problem for p in arith],
        "answer": [p.answer for p in arith], "category": [p.category for p in arith], "source": ["arith"] * len(arith),
    })
    weak = [p.category in WEAK_CATEGORIES and p.level != "easy" for p in arith]
    write_table(run_dir, "problems", problems)
    write_table(run_dir, "weakness", problems.select("problem_id", "category").with_columns(
        accs=pl.lit([0.25]), n_record=pl.lit(1, pl.Int64), max_acc=pl.Series([0.25 if w else 1.0 for w in weak]),
        slope=pl.lit(0.0), weak=pl.Series(weak)))
    categories = problems.group_by("category").agg(n_problems=pl.len()).sort("category")
    n_weak = [sum(w for w, p in zip(weak, arith, strict=True) if p.category == c) for c in categories["category"]]
    write_table(run_dir, "categories", categories.with_columns(
        n_problems=pl.col("n_problems").cast(pl.Int64), n_weak=pl.Series(n_weak, dtype=pl.Int64),
        fail_ratio=pl.Series(n_weak) / pl.col("n_problems"), share=pl.Series(n_weak) / sum(n_weak)))


def noisy_config(budget: int) -> PipelineConfig:
    config = PipelineConfig()
    config.roles.generator = EngineConfig(options=NOISE)
    config.roles.judges = [EngineConfig(options={"judge_error": JUDGE_ERROR})]
    config.roles.labeler = EngineConfig(options={"labeler_error": LABELER_ERROR})
    config.synthesize.budget = budget
    config.synthesize.set_size = 3
    return config


def precision_recall(predicted: pl.Series, actual: pl.Series) -> tuple[float, float, int, int]:
    hits = int((predicted & actual).sum())
    flagged, positives = int(predicted.sum()), int(actual.sum())
    return hits / flagged if flagged else float("nan"), hits / positives if positives else float("nan"), flagged, positives


def report_row(name: str, predicted: pl.Series, actual: pl.Series) -> str:
    precision, recall, flagged, positives = precision_recall(predicted, actual)
    return f"  {name:<28} precision {precision:6.1%}  recall {recall:6.1%}  (rejected {flagged}, truly bad {positives})"


def with_truth(table: pl.DataFrame) -> pl.DataFrame:
    truths = [solve(problem) if problem is not None else None for problem in table["problem"]]
    return table.with_columns(kind=pl.Series([t.kind if t else None for t in truths], dtype=pl.Utf8),
                              truth=pl.Series([t.answer if t else None for t in truths], dtype=pl.Utf8))


def main() -> None:
    ui.set_quiet(True)
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp)
        identified_run(run_dir)
        synthesize.run(noisy_config(budget=1500), run_dir)
        generated = with_truth(pl.concat([
            read_table(run_dir, "synthetic").select("syn_id", "problem").with_columns(reject_reason=pl.lit(None, pl.Utf8)),
            read_parquet(rejected_path(run_dir, "synthetic")).select("syn_id", "problem", "reject_reason"),
        ])).filter(pl.col("problem").is_not_null())
        rated = with_truth(pl.concat([
            read_table(run_dir, "rated").select("problem").with_columns(rejected=pl.lit(False)),
            read_parquet(rejected_path(run_dir, "rated")).select("problem").with_columns(rejected=pl.lit(True)),
        ]))
        labeled_columns = ("problem", "answer", "consistency")
        labeled = with_truth(pl.concat([
            read_table(run_dir, "labeled").select(labeled_columns).with_columns(rejected=pl.lit(False)),
            read_parquet(rejected_path(run_dir, "labeled")).select(labeled_columns).with_columns(rejected=pl.lit(True)),
        ]))
        kept = labeled.filter(~pl.col("rejected"))
        dedup = generated.filter(pl.col("reject_reason") == "near_duplicate").height

    print(f"synthesis quality on the arith world: oracle noise {NOISE['ill_posed']:.0%} per defect kind "
          f"(sum {sum(NOISE.values()):.0%}), judge error {JUDGE_ERROR:.0%}, labeler error {LABELER_ERROR:.0%}")
    print(f"generate: {generated.height} parsed problems; pre-filters by reason (vs the injected defect):")
    for kind in PREFILTERED:
        print(report_row(kind, generated["reject_reason"] == kind, generated["kind"] == kind))
    prefiltered = generated["reject_reason"].is_in(PREFILTERED)
    print(report_row("all pre-filters (any defect)", prefiltered, generated["kind"].is_in(PREFILTERED)))
    print(f"  near_duplicate: {dedup} rejected (exact repeats of a seed or earlier problem after normalisation)")
    print(f"rate: {rated.height} problems reached the judges")
    print(report_row("judges (defective problem)", rated["rejected"], rated["kind"] != "ok"))
    print(report_row("  of which ill_posed", rated["rejected"] & (rated["kind"] == "ill_posed"),
                     rated["kind"] == "ill_posed"))
    wrong = (labeled["kind"] != "ok") | labeled["answer"].is_null() | (labeled["answer"] != labeled["truth"]).fill_null(True)
    print(f"label: {labeled.height} problems reached the labeler")
    print(report_row("consistency (bad or wrong)", labeled["rejected"], wrong))
    before_defects = (generated["kind"] != "ok").mean()
    after_defects = (kept["kind"] != "ok").mean()
    accuracy = (kept["answer"] == kept["truth"]).mean()
    print(f"baseline (unfiltered generator output) vs labeled: defective share {before_defects:.1%} -> "
          f"{after_defects:.1%}; labeled {kept.height} problems, reference answers correct {accuracy:.1%} "
          f"(a single labeler sample is right {1 - LABELER_ERROR:.0%} of the time)")


if __name__ == "__main__":
    main()
