"""`sws synthesize --estimate` against the full run: projected and actual tokens (prompt + completion) per step.

Arith world, the noisy oracle teachers of `synthesis_quality` (600 seed problems, a third of them weak): for each
budget and `synthesize.estimate_share`, a fresh run directory gets the pilot (`--estimate`), then the full run,
which reads the pilot's answers from the request cache; the table gives the projection, the actual count and
the error per step, after a line with the pilot's size, how many of the budget's sets are variants
(instance-filled) and the share of generated problems dropped as near-duplicates in the pilot and in the run.

    PYTHONPATH=src .venv/bin/python bench/estimate.py [--budgets 200 1000] [--shares 0.05 0.1 0.2] [--seeds 0]
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
from pathlib import Path

from synthesis_quality import identified_run, noisy_config

from sws import tokens, ui
from sws.manifests import read_manifest
from sws.run_dir import RunDir
from sws.stages import synthesize


def compare(budget: int, share: float, seed: int) -> list[tuple[str, int, int]]:
    """Per step that called a model: projected tokens, actual tokens."""
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp)
        identified_run(run)
        cfg = noisy_config(budget)
        cfg.synthesize.estimate_share = share
        cfg.seed = seed
        synthesize.run(cfg, run, estimate=True)
        estimate = json.loads((RunDir(run).estimate.root / "estimate.json").read_text())
        synthesize.run(cfg, run)
        rows = []
        for step in synthesize.steps_on(cfg):
            actual = (read_manifest(run, step) or {}).get("tokens") or {}
            if actual:
                rows.append((step, tokens.total_tokens(estimate["steps"][step]["tokens"]), tokens.total_tokens(actual)))
        spending = read_manifest(run, "combine")["info"]["spending"].values()
        variants = sum(spent["instance_filled"] for spent in spending)
        duplicates = [(funnel.get("near_duplicate", 0), manifest["info"]["funnel"]["in"])
                      for manifest in (read_manifest(RunDir(run).estimate.root, "generate"), read_manifest(run, "generate"))
                      for funnel in [manifest["info"]["funnel"]["rejected"]]]
        print(f"seed {seed}, budget {budget}, share {share:g}: pilot of {estimate['pilot_sets']} of {estimate['sets']} "
              f"concept sets ({variants} of them variants); near-duplicates: pilot {duplicates[0][0]}/{duplicates[0][1]}, "
              f"run {duplicates[1][0]}/{duplicates[1][1]}")
        return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budgets", type=int, nargs="+", default=[200, 1000])
    parser.add_argument("--shares", type=float, nargs="+", default=[0.05, 0.1, 0.2])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0], help="the pipeline's seed (request seeds, sets)")
    args = parser.parse_args()
    ui.set_quiet(True)
    print(f"{'budget':>6} {'share':>5}  {'step':<9} {'projected':>10} {'actual':>10} {'error':>7}")
    for seed, budget, share in itertools.product(args.seeds, args.budgets, args.shares):
        rows = compare(budget, share, seed)
        total = ("total", sum(row[1] for row in rows), sum(row[2] for row in rows))
        for step, projected, actual in [*rows, total]:
            print(f"{budget:>6} {share:>5g}  {step:<9} {projected:>10,} {actual:>10,} "
                  f"{(projected - actual) / actual:>+7.1%}")


if __name__ == "__main__":
    main()
