"""Co-training: what the synthesizer's update adds to a step, the co-trained arm's step time over the frozen
arm's (goal ≤ 1.10; SynCo reports +0.6 %).

Both arms run the preset's step (B = 8 cards, K = 8 rollouts, the arith world's warm-started synthesizer and
policy) for the same number of steps from the same start; a step's time is the sum of its phases (generate,
verify, solve, update) as the metrics table records them, checkpoint writing left out (it is the same in both).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

import torch

from sws.config import PipelineConfig, load_config
from sws.cotrain.arms import COTRAIN_ARMS
from sws.cotrain.session import ArmRun, run_arm
from sws.stages.cotrain import step_settings
from sws.world import get_world
from sws.worlds.arith.families import CATEGORIES

STEPS = 20
PHASES = ("seconds_generate", "seconds_verify", "seconds_solve", "seconds_update")
PRESET = Path(__file__).resolve().parents[1] / "src" / "sws" / "pipelines" / "cotrain.yaml"


def step_seconds(arm_name: str, cfg: PipelineConfig, folder: Path) -> list[float]:
    arm = next(each for each in COTRAIN_ARMS if each.name == arm_name)
    section = cfg.cotrain
    world = get_world("arith")
    run = ArmRun(folder / arm_name, world.synthesizer(cfg).build(), world.built_policy(cfg).build(), STEPS,
                 cfg.seed, step_settings(arm, section),
                 CATEGORIES, section.synthesizer_learning_rate, section.reasoner_learning_rate, (), 1)
    metrics = run_arm(run, world).metrics
    return [sum(row[phase] for phase in PHASES) for row in metrics[1:]]  # the first step warms up


def main() -> int:
    torch.set_num_threads(1)
    cfg = load_config(PRESET)
    with tempfile.TemporaryDirectory() as folder:
        frozen = step_seconds("frozen", cfg, Path(folder))
        cotrained = step_seconds("cotrained", cfg, Path(folder))
    ratio = statistics.fmean(cotrained) / statistics.fmean(frozen)
    print(f"steps: {len(frozen)} each; seconds per step: frozen {statistics.fmean(frozen):.3f}, "
          f"co-trained {statistics.fmean(cotrained):.3f}; co-trained / frozen = {ratio:.3f} (goal ≤ 1.10)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
