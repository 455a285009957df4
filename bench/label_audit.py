"""The label audit against the arith world's ground truth: wrong labels that reach filtered.parquet without and
with the audit, and the audit's precision and recall.

One synthesis with the noisy oracle (labeler_error 0.15), then the difficulty filter with the oracle as the
policy, twice on copies of the same run: audit off, and audit on (the oracle as auditor, its own
labeler_error 0.15, a different seed, audit.samples 4). A label is wrong when the problem is not well-formed or
its label is not equivalent to `sws.worlds.arith.solve`'s answer. Run for the default label_samples (8) and
for a cheap labeler (label_samples 2), where many more wrong labels pass self-consistency.

    PYTHONPATH=src .venv/bin/python bench/label_audit.py [--budget 300]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import polars as pl
from synthesis_quality import identified_run, noisy_config, precision_recall

from sws import ui
from sws.config import EngineConfig, PipelineConfig
from sws.grading import equivalent
from sws.stages import filter as filter_stage
from sws.stages import synthesize
from sws.tables import read_parquet, read_table, rejected_path
from sws.worlds.arith import solve

LABELER_ERROR = 0.15
AUDITOR = EngineConfig(options={"labeler_error": LABELER_ERROR, "seed": 1})
# The policy as the filter sees it: the oracle answering right half the time, so accuracies spread over the band.
POLICY = EngineConfig(model="arith-oracle-policy", options={"labeler_error": 0.5}, temperature=1.0)


def wrong_label(problem: str, answer: str | None) -> bool:
    truth = solve(problem)
    return truth.kind != "ok" or answer is None or not equivalent(truth.answer, answer)


def config(budget: int, label_samples: int, audited: bool) -> PipelineConfig:
    cfg = noisy_config(budget)
    cfg.roles.labeler = EngineConfig(options={"labeler_error": LABELER_ERROR})
    cfg.synthesize.label_samples = label_samples
    cfg.roles.policy = POLICY
    cfg.roles.auditor = AUDITOR if audited else None
    return cfg


def share_wrong(run_dir: Path) -> tuple[int, int]:
    filtered = read_table(run_dir, "filtered")
    return sum(wrong_label(p, a) for p, a in filtered.select("problem", "answer").iter_rows()), filtered.height


def measure(budget: int, label_samples: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        plain, audited = Path(tmp) / "plain", Path(tmp) / "audited"
        plain.mkdir()
        identified_run(plain)
        synthesize.run(config(budget, label_samples, False), plain)
        shutil.copytree(plain, audited)
        filter_stage.run(config(budget, label_samples, False), plain)
        cfg = config(budget, label_samples, True)
        synthesize.run(cfg, audited)
        filter_stage.run(cfg, audited)
        labeled = read_table(audited, "labeled")
        quarantined = set(read_parquet(rejected_path(audited, "audited"))["syn_id"].to_list())
        wrong = pl.Series([wrong_label(p, a) for p, a in labeled.select("problem", "answer").iter_rows()])
        flagged = labeled["syn_id"].is_in(list(quarantined))
        policy_rejected = read_parquet(rejected_path(plain, "filtered")).filter(
            pl.col("reject_reason") == "policy_disagrees")
        policy_wrong = sum(wrong_label(p, a) for p, a in policy_rejected.select("problem", "answer").iter_rows())
        without, with_audit = share_wrong(plain), share_wrong(audited)
    precision, recall, n_flagged, n_wrong = precision_recall(flagged, wrong)
    print(f"label_samples {label_samples}: {labeled.height} labeled, {n_wrong} wrong labels ({n_wrong / labeled.height:.1%})")
    print(f"  filtered.parquet wrong labels: without audit {without[0]}/{without[1]} ({without[0] / without[1]:.1%}), "
          f"with audit {with_audit[0]}/{with_audit[1]} ({with_audit[0] / max(with_audit[1], 1):.1%})")
    print(f"  audit: quarantined {n_flagged}; precision {precision:.1%}, recall {recall:.1%}; right labels kept "
          f"{1 - (n_flagged - round(precision * n_flagged)) / max(labeled.height - n_wrong, 1):.1%}")
    print(f"  policy_disagrees (filter, no model cost): {policy_rejected.height} flagged, {policy_wrong} truly wrong")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=int, default=300)
    args = parser.parse_args()
    ui.set_quiet(True)
    print(f"label audit on the arith world: labeler_error {LABELER_ERROR}, auditor oracle labeler_error "
          f"{LABELER_ERROR} (another seed), audit.samples 4, max_disagreement 0.5, budget {args.budget}")
    for label_samples in (8, 2):
        measure(args.budget, label_samples)


if __name__ == "__main__":
    main()
