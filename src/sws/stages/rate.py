"""`sws synthesize --steps rate`: every judge rates every problem R times as perfect / acceptable / bad.

Reads `synthetic.parquet`; writes `rated.parquet` and `rated.rejected.parquet`. A verdict that cannot be parsed
is recorded as `unparsed` and counts against the perfect share (it is never mapped to a rating). Keep rule:
perfect share (over all verdicts of all judges) >= synthesize.min_perfect_ratio, and no `bad` verdict unless
synthesize.allow_bad. `verdicts` is a JSON object {judge: [verdict, ...]}, judges named `<index>:<engine>/<model>`.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from sws import ui
from sws.artifacts import (
    FLOAT,
    INT,
    STR,
    StageResult,
    read_table,
    rejected_path,
    run_stage,
    table_path,
)
from sws.config import EngineConfig, PipelineConfig
from sws.errors import UserError
from sws.funnel import write_step_outputs
from sws.llm_calls import engine_for, generate_in_shards, request_seed, role_request
from sws.parsing import VERDICTS, parse_verdict
from sws.prompts import PromptTemplate, load_template

STEP = "rate"
UNPARSED = "unparsed"
SUMMARY_SCHEMA = {"verdicts": STR, "n_perfect": INT, "n_acceptable": INT, "n_bad": INT, "n_unparsed": INT,
                  "perfect_ratio": FLOAT}


def judge_name(index: int, judge: EngineConfig) -> str:
    return f"{index}:{judge.engine}/{judge.model}"


def keep_reason(verdicts: list[str], min_perfect_ratio: float, allow_bad: bool) -> str | None:
    """Why a problem with these verdicts is rejected, or None to keep it."""
    if verdicts and all(verdict == UNPARSED for verdict in verdicts):
        return "unparsed_verdicts"
    if not allow_bad and "bad" in verdicts:
        return "bad_verdict"
    if not verdicts or verdicts.count("perfect") / len(verdicts) < min_perfect_ratio:
        return "low_perfect_ratio"
    return None


def run(cfg: PipelineConfig, run_dir: Path, force: bool = False) -> StageResult:
    run_dir = Path(run_dir)
    synth = cfg.synthesize
    template = load_template("rate", synth.prompt_dir)
    return run_stage(
        run_dir, STEP,
        config={
            "seed": cfg.seed, "judges": [judge.model_dump(mode="json") for judge in cfg.roles.judges],
            "ratings_per_judge": synth.ratings_per_judge, "min_perfect_ratio": synth.min_perfect_ratio,
            "allow_bad": synth.allow_bad, "prompt": template.digest,
        },
        inputs=[table_path(run_dir, "synthetic")],
        outputs=[table_path(run_dir, "rated"), rejected_path(run_dir, "rated")],
        body=lambda: _rate(cfg, run_dir, template),
        force=force,
    )


def _rate(cfg: PipelineConfig, run_dir: Path, template: PromptTemplate) -> StageResult:
    synth = cfg.synthesize
    if not cfg.roles.judges:
        raise UserError("config field 'roles.judges' is empty; list at least one judge role")
    synthetic = read_table(run_dir, "synthetic")
    ids, problems = synthetic["syn_id"].to_list(), synthetic["problem"].to_list()
    prompts = [template.render({"problem": problem}) for problem in problems]
    verdicts: list[dict[str, list[str]]] = [{} for _ in problems]
    if not problems:
        ui.info(f"{STEP}: {table_path(run_dir, 'synthetic')} is empty; nothing to rate")
    for index, judge in enumerate(cfg.roles.judges if problems else []):
        name = judge_name(index, judge)
        requests = [
            role_request(judge, task="rate", fields={"problem": problem}, text=text, n=synth.ratings_per_judge,
                         seed=request_seed(cfg.seed, STEP, name, problem_id))
            for problem_id, problem, text in zip(ids, problems, prompts, strict=True)
        ]
        with engine_for(judge, run_dir) as engine:
            completions = generate_in_shards(engine, requests, synth.shard_size, f"rate (judge {name})")
        for by_judge, answers in zip(verdicts, completions, strict=True):
            by_judge[name] = [parse_verdict(answer.text) or UNPARSED for answer in answers]
    kept, rejected = [], []
    for row, by_judge in zip(synthetic.iter_rows(named=True), verdicts, strict=True):
        every = [verdict for judged in by_judge.values() for verdict in judged]
        counts = {f"n_{verdict}": every.count(verdict) for verdict in (*VERDICTS, UNPARSED)}
        record = {**row, "verdicts": json.dumps(by_judge, sort_keys=True), **counts,
                  "perfect_ratio": counts["n_perfect"] / len(every) if every else 0.0}
        reason = keep_reason(every, synth.min_perfect_ratio, synth.allow_bad)
        if reason is None:
            kept.append(record)
        else:
            rejected.append({**record, "reject_reason": reason})
    schema = {**synthetic.schema, **SUMMARY_SCHEMA}
    return write_step_outputs(run_dir, STEP, "rated", synthetic.height, pl.DataFrame(kept, schema=schema),
                              pl.DataFrame(rejected, schema={**schema, "reject_reason": STR}))
