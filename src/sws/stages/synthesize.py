"""`sws synthesize`: extract → combine → generate → rate → label, then the funnel table.

Each sub-step is a stage of its own (manifest `manifests/<step>.json`, skipped when current, resumable from the
request cache); this module runs the chosen ones in order, with one engine per distinct role setting for the
whole run (`sws.llm_calls.shared_engines`), and prints what their results record: the funnel, how each
category's budget was spent (when combine ran) and the tokens per step and role.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sws import runner, tokens, ui
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.funnel import (
    FunnelRow,
    budget_spending,
    dataframe_table,
    funnel_table,
    per_kept_problem,
    tokens_table,
    truncation_advice,
)
from sws.llm_calls import shared_engines
from sws.manifests import StageResult
from sws.stage import Option, Stage, synthesis_steps
from sws.stages import combine, generate
from sws.stages import estimate as pilot


def declared_steps() -> dict[str, Stage]:
    """The synthesis steps, in order, as their declarations say."""
    return {stage.name: stage for stage in synthesis_steps()}


def steps_on(cfg: PipelineConfig) -> list[str]:
    """The declared steps this config asks for (the audit only with an auditor), in order."""
    return [name for name, stage in declared_steps().items() if stage.is_on(cfg)]


def max_tokens_fields() -> dict[str, str]:
    """Per step that calls a model: the setting that bounds its completions."""
    return {stage.name: f"roles.{role}{'[]' if role == 'judges' else ''}.max_tokens"
            for stage in synthesis_steps() for role in stage.roles}


def parse_steps(text: str | None) -> list[str]:
    """The steps named in a comma-separated `--sub-steps` value, in pipeline order (all when None)."""
    known = declared_steps()
    if text is None:
        return list(known)
    named = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [step for step in named if step not in known]
    if unknown or not named:
        raise UserError(f"--sub-steps: unknown sub-step '{unknown[0] if unknown else text}'; "
                        f"use a comma-separated subset of {','.join(known)}")
    return [step for step in known if step in named]


def spending_cap(cfg: PipelineConfig) -> tokens.Cap | None:
    synth = cfg.synthesize
    if synth.max_tokens is None and synth.max_cost is None:
        return None
    return tokens.Cap(synth.max_tokens, synth.max_cost, cfg.pricing)


def run(cfg: PipelineConfig, run_dir: Path, force: bool = False, steps: Sequence[str] | None = None,
        estimate: bool = False) -> StageResult:
    """The chosen steps in order (with `estimate`, every step's pilot instead, see `sws.stages.estimate`); a
    spending cap stops them with `tokens.CapReached`."""
    run_dir = Path(run_dir)
    declared = declared_steps()
    if estimate:
        if steps is not None:
            raise UserError("--estimate projects the whole synthesis; leave out --sub-steps")
        return pilot.run(cfg, run_dir, steps_on(cfg), force)
    named = list(declared) if steps is None else parse_steps(",".join(steps))
    chosen = [step for step in named if step in steps_on(cfg)]
    for step in named if steps is not None else ():
        if step not in chosen:
            ui.info(f"synthesize: step {step} is off in this config, skipped (see its section '{declared[step].section}')")
    with shared_engines(), tokens.capped(spending_cap(cfg)):
        results = {step: runner.run(declared[step], cfg, run_dir, force) for step in chosen}
    funnel = [FunnelRow.from_info(result.info["funnel"]) for result in results.values()]
    ui.console.print(funnel_table(funnel))
    if combine.STEP in results:
        generated = results.get(generate.STEP)
        spending = budget_spending(results[combine.STEP].info, generated.info if generated else None)
        if spending.height:
            ui.console.print(dataframe_table(spending, "how each category's budget was spent"))
    used = tokens_table({step: result.tokens for step, result in results.items()}, cfg.pricing)
    if used.height:
        ui.console.print(dataframe_table(used, "tokens per step and role"))
        ui.info(f"synthesize: {per_kept_problem(used, funnel[-1].kept, 'labeled')}")
    for advice in truncation_advice(funnel, max_tokens_fields()):
        ui.info(advice)
    if chosen and chosen[-1] == steps_on(cfg)[-1] and funnel[-1].kept == 0:
        ui.info(f"synthesize: no labeled problems in {run_dir}; the funnel above shows where they were dropped")
    rows = {name: count for result in results.values() for name, count in result.rows.items()}
    return StageResult("synthesize", rows=rows, info={"funnel": [row.as_info() for row in funnel]},
                       seconds=round(sum(result.seconds for result in results.values()), 3))


DECLARED = (Stage(
    "synthesize", "Turn the weak problems into new problems with verified reference answers, and print the "
    "funnel.", drive=run, reads=("weakness", "categories", "problems"), section="synthesize",
    uses_executor=True, command="sws synthesize", options=(
        Option("synthesize.budget", "Concept sets (new problems) to sample in all.", int, "--concept-sets"),
        Option("synthesize.max_tokens", "Stop cleanly between shards once the sub-steps' prompt + completion tokens "
               "reach this (exit code 3); rerun with a higher cap to continue.", int, "--token-cap"),
        Option("synthesize.max_cost", "Stop cleanly between shards once the sub-steps' cost (from `pricing`, dollars) "
               "reaches this (exit code 3); rerun with a higher cap to continue.", float, "--cost-cap"),
        Option("synthesize.estimate_share", "--estimate: share of the concept sets the pilot runs.",
               float),
    )),)
