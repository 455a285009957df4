"""Early stopping in waves against drawing every sample: the same kept problems (and labels), and the share of
labeler and filter completions and tokens saved.

1. Label (synthesize.label_wave), arith world: one noisy synthesis up to `rated` (budget 300), then `label` on
   copies of the run with label_wave 8 (every sample, as single-sample requests), 4, 2 and 1, at labeler_error
   0.15 and 0.3.
2. Label, the recorded Qwen2.5-Coder-1.5B labeler samples (two per problem): the waves replayed with
   `label_settled` and `teacher_label` against labeling from both samples.
3. Filter (filter.wave), arith world: the labeled problems of (1) scored by the oracle as policy (right half
   the time), 8 rollouts, band [0.25, 0.75], with filter.wave 8, 4, 2 and 1, with policy_disagrees on (problems
   at accuracy 0 draw every sample) and off. (No policy outputs were recorded from a real model.)

    PYTHONPATH=src .venv/bin/python bench/early_stopping.py [--budget 300]
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from synthesis_quality import identified_run, noisy_config

from sws import ui
from sws.config import EngineConfig
from sws.engines import Completion
from sws.manifests import read_manifest
from sws.stages import filter as filter_stage
from sws.stages import label, synthesize
from sws.tables import read_table

RECORDING = Path(__file__).parents[1] / "tests" / "fixtures" / "teacher_outputs" / "qwen2.5-coder-1.5b-instruct.jsonl"
SAMPLES = 8
POLICY = EngineConfig(model="arith-oracle-policy", options={"labeler_error": 0.5}, temperature=1.0)


def saved(used: dict, full: dict) -> str:
    return (f"completions {used['completions']} ({1 - used['completions'] / full['completions']:.1%} saved), "
            f"completion tokens {used['completion']} ({1 - used['completion'] / full['completion']:.1%} saved)")


def arith(budget: int, labeler_error: float, filter_too: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        base.mkdir()
        identified_run(base)
        synthesize.run(noisy_config(budget), base, steps=["extract", "combine", "generate", "rate"])
        results = {}
        for wave in (SAMPLES, 4, 2, 1):
            run = Path(tmp) / f"wave-{wave}"
            shutil.copytree(base, run)
            cfg = noisy_config(budget)
            cfg.roles.labeler = EngineConfig(options={"labeler_error": labeler_error})
            cfg.synthesize.label_samples, cfg.synthesize.label_wave = SAMPLES, wave
            label.run(cfg, run)
            used = read_manifest(run, "label")["tokens"]["labeler"]
            results[wave] = (read_table(run, "labeled").select("syn_id", "answer").rows(), used)
        full, full_used = results[SAMPLES]
        print(f"arith, labeler_error {labeler_error}, {SAMPLES} samples, {len(full)} kept with every sample drawn "
              f"({full_used['completions']} completions, {full_used['completion']} completion tokens):")
        for wave in (4, 2, 1):
            kept, used = results[wave]
            print(f"  wave {wave}: same kept problems and labels: {kept == full}; {saved(used, full_used)}")
        if filter_too:
            filtering(Path(tmp), Path(tmp) / f"wave-{SAMPLES}", budget)


def filtering(tmp: Path, labeled_run: Path, budget: int) -> None:
    for policy_disagrees in (True, False):
        results = {}
        for wave in (SAMPLES, 4, 2, 1):
            run = tmp / f"filter-{policy_disagrees}-{wave}"
            shutil.copytree(labeled_run, run)
            cfg = noisy_config(budget)
            cfg.roles.policy = POLICY
            cfg.filter.band, cfg.filter.rollouts, cfg.filter.wave = (0.25, 0.75), SAMPLES, wave
            cfg.audit.policy_disagrees = policy_disagrees
            filter_stage.run(cfg, run)
            results[wave] = (read_table(run, "filtered")["syn_id"].to_list(),
                             read_manifest(run, "score")["tokens"]["policy"])
        full, full_used = results[SAMPLES]
        print(f"filter, policy_disagrees {policy_disagrees}: {len(full)} of "
              f"{read_table(labeled_run, 'labeled').height} kept with every rollout drawn")
        for wave in (4, 2, 1):
            kept, used = results[wave]
            print(f"  wave {wave}: same kept problems: {kept == full}; {saved(used, full_used)}")


def recorded() -> None:
    rows = [json.loads(line) for line in RECORDING.read_text().splitlines() if line]
    samples: dict[str, list[Completion]] = {}
    for row in rows:
        if row["role"] == "labeler":
            samples.setdefault(row["values"]["problem"], []).append(
                Completion(row["output"], row["completion_tokens"], row["finish_reason"]))
    same, drawn_total, all_total = 0, 0, 0
    for completions in samples.values():
        answers = [label.sample_answer(completion) for completion in completions]
        full = label.teacher_label(answers)
        drawn = len(answers)
        for count in range(1, len(answers) + 1):
            answer, share = label.teacher_label(answers[:count])
            if label.label_settled(round(share * count), count, len(answers), 0.5, weak_to_strong=False):
                drawn = count
                break
        waved = label.teacher_label(answers[:drawn])
        same += (full[0] if full[1] >= 0.5 else None) == (waved[0] if waved[1] >= 0.5 else None)
        drawn_total += drawn
        all_total += len(answers)
    print(f"recorded Qwen2.5-Coder-1.5B labeler samples ({len(samples)} problems, {all_total} samples): waves of "
          f"1 give the same decision and label for {same} of {len(samples)}; {all_total - drawn_total} samples "
          f"saved (with 2 samples a problem, the second is always needed: a strict majority of 2 is 2)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--budget", type=int, default=300)
    args = parser.parse_args()
    ui.set_quiet(True)
    for labeler_error in (0.15, 0.3):
        arith(args.budget, labeler_error, filter_too=labeler_error == 0.15)
    recorded()


if __name__ == "__main__":
    main()
