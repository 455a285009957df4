"""`sws untargeted`: the untargeted-synthesis control (the SwS paper's claim is that targeted synthesis beats
capability-agnostic synthesis).

With `synthesize.untargeted_arm`, after the band filter: the same synthesis, band filter and mix as the run's,
fed by random seed problems instead of the weak ones. The control is a run folder of its own inside the run,
`untargeted/` (`RunDir.untargeted`), as a later round of `sws run --rounds N` is: `untargeted_inputs` puts in it

- `problems.parquet`: the run's seed problems;
- `weakness.parquet`: the run's, with `weak` set on as many seed problems as the run has weak ones, drawn at random
  (the run's seed) among those rolled out, whatever their accuracy;
- `categories.parquet`: identify's category table of that weakness, so the budget follows the random draw;
- `train/initial/final`: a link to the run's initial checkpoint, which the band filter scores with.

Then the same declared stages run there (synthesize's steps, score and filter, mix), each with its manifest in
`untargeted/manifests/`, through the run's request and embedding caches. The arm `untargeted` trains on
`untargeted/augmented` like augmented (same steps, band and online filter).
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sws import runner, ui
from sws.config import PipelineConfig
from sws.manifests import StageResult
from sws.run_dir import RunDir
from sws.runner import StageContext, StageOutput
from sws.stage import Stage
from sws.stages import filter as band_filter
from sws.stages import mix, synthesize
from sws.stages.identify import category_table
from sws.stages.rounds import link_checkpoint

STEP = "untargeted"


def random_weakness(weakness: pl.DataFrame, seed: int) -> pl.DataFrame:
    """`weakness` with `weak` on as many rolled-out problems as it marks weak, drawn at random (`seed`)."""
    n_weak = int(weakness["weak"].sum())
    rolled_out = weakness.filter(pl.col("n_record") > 0)["problem_id"]
    drawn = rolled_out.sample(min(n_weak, rolled_out.len()), seed=seed)
    return weakness.with_columns(weak=pl.col("problem_id").is_in(drawn.implode()))


def parent_run(control: RunDir) -> RunDir:
    """The run whose control `control` is."""
    return RunDir(control.root.parent)


def wire(context: StageContext) -> StageOutput:
    """The control's inputs from the run (see the module's docstring)."""
    weakness = random_weakness(context.table("weakness"), context.cfg.seed)
    link_checkpoint(context.reads_from.initial_checkpoint, context.run.initial_checkpoint)
    ui.info(f"{STEP}: {int(weakness['weak'].sum())} seed problems drawn at random in place of the weak ones "
            f"-> {context.run.root}")
    marker = "the untargeted control of the run above; its caches are that run's\n"
    return StageOutput(tables={"problems": context.table("problems"), "weakness": weakness,
                               "categories": category_table(weakness)},
                       files={context.run.control_marker: lambda path: path.write_text(marker)},
                       info={"drawn_weak": int((weakness["weak"] & context.table("weakness")["weak"]).sum())})


INPUTS = Stage(
    "untargeted_inputs", "The untargeted control's seed problems, random 'weak' ones and policy, from the run.", wire,
    reads=("problems", "weakness"), writes=("problems", "weakness", "categories"),
    reads_from=parent_run, settings=lambda cfg, options: {"seed": cfg.seed},
    input_files=lambda cfg, run: [parent_run(run).initial_checkpoint],
    output_files=lambda cfg, run, options: [run.initial_checkpoint, run.control_marker], section="synthesize",
    command="sws untargeted", in_run=False)


def run(cfg: PipelineConfig, run_dir: Path, force: bool = False) -> StageResult:
    """Inputs, synthesis, band filter and mix of the control, in `untargeted/`."""
    folder = RunDir(run_dir).untargeted.root
    runner.run(INPUTS, cfg, folder, force)
    synthesize.run(cfg, folder, force)
    band_filter.run(cfg, folder, force)
    return runner.run(mix.STAGE, cfg, folder, force)


def is_on(cfg: PipelineConfig) -> bool:
    return cfg.synthesize.untargeted_arm


DECLARED = (Stage(
    STEP, "The untargeted control: the same synthesis, band filter and mix, fed by random seed problems instead "
    "of the weak ones (synthesize.untargeted_arm).", drive=run, writes=(), section="synthesize",
    uses_executor=True, runs_when=is_on, title="untargeted synthesis", example="sws untargeted --run runs/demo"),)
