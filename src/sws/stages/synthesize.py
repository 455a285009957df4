"""`sws synthesize`: extract → combine → generate → rate → label, then the funnel table.

Each sub-step is a stage of its own (manifest `manifests/<step>.json`, skipped when current, resumable from the
request cache); this module runs the chosen ones in order, with one engine per distinct role setting for the
whole run (`sws.llm_calls.shared_engines`), and prints the funnel kept in their manifests and how each
category's budget was spent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from sws import ui
from sws.artifacts import StageResult
from sws.config import PipelineConfig
from sws.errors import UserError
from sws.funnel import FunnelRow, dataframe_table, funnel_table, read_budget_spending, truncation_advice
from sws.llm_calls import shared_engines
from sws.stages import combine, concepts, generate, label, rate

STEPS: dict[str, Callable[[PipelineConfig, Path, bool], StageResult]] = {
    concepts.STEP: concepts.run,
    combine.STEP: combine.run,
    generate.STEP: generate.run,
    rate.STEP: rate.run,
    label.STEP: label.run,
}


MAX_TOKENS_FIELDS = {
    concepts.STEP: "roles.extractor.max_tokens", generate.STEP: "roles.generator.max_tokens",
    rate.STEP: "roles.judges[].max_tokens", label.STEP: "roles.labeler.max_tokens",
}


def parse_steps(text: str | None) -> list[str]:
    """The steps named in a comma-separated `--steps` value, in pipeline order (all when None)."""
    if text is None:
        return list(STEPS)
    named = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [step for step in named if step not in STEPS]
    if unknown or not named:
        raise UserError(f"--steps: unknown step '{unknown[0] if unknown else text}'; "
                        f"use a comma-separated subset of {','.join(STEPS)}")
    return [step for step in STEPS if step in named]


def run(cfg: PipelineConfig, run_dir: Path, force: bool = False, steps: Sequence[str] | None = None) -> StageResult:
    run_dir = Path(run_dir)
    chosen = list(STEPS) if steps is None else parse_steps(",".join(steps))
    with shared_engines():
        results = [STEPS[step](cfg, run_dir, force) for step in chosen]
    funnel = [FunnelRow.from_info(result.info["funnel"]) for result in results]
    ui.console.print(funnel_table(funnel))
    spending = read_budget_spending(run_dir, combine.STEP, generate.STEP)
    if spending is not None and spending.height:
        ui.console.print(dataframe_table(spending, "how each category's budget was spent"))
    for advice in truncation_advice(funnel, MAX_TOKENS_FIELDS):
        ui.info(advice)
    if label.STEP in chosen and funnel[-1].kept == 0:
        ui.info(f"synthesize: no labeled problems in {run_dir}; the funnel above shows where they were dropped")
    rows = {name: count for result in results for name, count in result.rows.items()}
    return StageResult("synthesize", rows=rows, info={"funnel": [row.as_info() for row in funnel]},
                       seconds=round(sum(result.seconds for result in results), 3))
