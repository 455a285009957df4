"""`sws synthesize --sub-steps rate`: every judge rates every problem R times as perfect / acceptable / bad.

Reads `synthetic.parquet`; writes `rated.parquet` and `rated.rejected.parquet`. A judgement counts only when
its last verdict line names a rating and stands below an analysis (`sws.parsing.parse_judgement`): a bare
"Verdict: perfect" is a rubber stamp, not a rating. A judgement that does not count, or that was cut off at
max_tokens, is asked again with a new seed up to synthesize.rate_retries times; if it still does not count it is
recorded as `unparsed` or `truncated` and counts against the perfect share (it is never mapped to a rating).
Keep rule: perfect share (over all verdicts of all judges) >= synthesize.min_perfect_ratio, and no `bad`
verdict unless synthesize.allow_bad. `verdicts` is a JSON object {judge: [verdict, ...]}, judges named
`<index>:<engine>/<model>`; `reasoning` holds the analyses in the same shape ('' where none counted).
"""

from __future__ import annotations

import json

import polars as pl

from sws import ui
from sws.config import EngineConfig, PipelineConfig
from sws.engines.base import Completion
from sws.errors import UserError
from sws.executors import Executor
from sws.llm_calls import attempt_role, request_seed, role_request
from sws.parsing import VERDICTS, Judgement, parse_judgement
from sws.prompts import load_template
from sws.runner import StageContext, StageOutput
from sws.stage import Stage
from sws.tables import FLOAT, INT, STR

STEP = "rate"
UNPARSED = "unparsed"
TRUNCATED = "truncated"
UNUSABLE = (UNPARSED, TRUNCATED)
SUMMARY_SCHEMA = {"verdicts": STR, "reasoning": STR, "n_perfect": INT, "n_acceptable": INT, "n_bad": INT,
                  "n_unparsed": INT, "n_truncated": INT, "perfect_ratio": FLOAT}


def judge_name(index: int, judge: EngineConfig) -> str:
    return f"{index}:{judge.engine}/{judge.model}"


def read_judgement(completion: Completion) -> Judgement | str:
    """The judgement a completion holds, or why it holds none (`truncated`, `unparsed`)."""
    if completion.truncated:
        return TRUNCATED
    return parse_judgement(completion.text) or UNPARSED


def keep_reason(verdicts: list[str], min_perfect_ratio: float, allow_bad: bool) -> str | None:
    """Why a problem with these verdicts is rejected, or None to keep it."""
    if verdicts and all(verdict == TRUNCATED for verdict in verdicts):
        return "truncated"
    if verdicts and all(verdict in UNUSABLE for verdict in verdicts):
        return "unparsed_verdicts"
    if not allow_bad and "bad" in verdicts:
        return "bad_verdict"
    if not verdicts or verdicts.count("perfect") / len(verdicts) < min_perfect_ratio:
        return "low_perfect_ratio"
    return None


def settings(cfg: PipelineConfig, options: dict) -> dict:
    synth = cfg.synthesize
    return {
        "seed": cfg.seed, "judges": [judge.model_dump(mode="json") for judge in cfg.roles.judges],
        "ratings_per_judge": synth.ratings_per_judge, "rate_retries": synth.rate_retries,
        "min_perfect_ratio": synth.min_perfect_ratio, "allow_bad": synth.allow_bad,
        "prompt": load_template("rate", synth.prompt_dir, cfg.world).digest,
    }


def rate(context: StageContext) -> StageOutput:
    """Every judge's verdicts on every synthetic problem; the keep rule decides."""
    cfg = context.cfg
    synth = cfg.synthesize
    if not cfg.roles.judges:
        raise UserError("config field 'roles.judges' is empty; list at least one judge role")
    template = load_template("rate", synth.prompt_dir, cfg.world)
    synthetic = context.table("synthetic")
    ids, problems = synthetic["syn_id"].to_list(), synthetic["problem"].to_list()
    prompts = [template.render({"problem": problem}) for problem in problems]
    judged: list[dict[str, list[Judgement | str]]] = [{} for _ in problems]
    completions: list[Completion] = []
    if not problems:
        ui.info(f"{STEP}: {context.source('synthetic')} is empty; nothing to rate")
    for index, judge in enumerate(cfg.roles.judges if problems else []):
        name = judge_name(index, judge)
        for by_problem, (judgements, answered) in zip(
            judged, judge_all(cfg, context.executor, judge, name, ids, problems, prompts), strict=True
        ):
            by_problem[name] = judgements
            completions.extend(answered)
    kept, rejected = [], []
    for row, by_judge in zip(synthetic.iter_rows(named=True), judged, strict=True):
        verdicts = {name: [verdict_label(j) for j in judgements] for name, judgements in by_judge.items()}
        reasoning = {name: [j.analysis if isinstance(j, Judgement) else "" for j in judgements]
                     for name, judgements in by_judge.items()}
        every = [verdict for judged_by_one in verdicts.values() for verdict in judged_by_one]
        counts = {f"n_{verdict}": every.count(verdict) for verdict in (*VERDICTS, *UNUSABLE)}
        record = {**row, "verdicts": json.dumps(verdicts, sort_keys=True),
                  "reasoning": json.dumps(reasoning, sort_keys=True), **counts,
                  "perfect_ratio": counts["n_perfect"] / len(every) if every else 0.0}
        reason = keep_reason(every, synth.min_perfect_ratio, synth.allow_bad)
        if reason is None:
            kept.append(record)
        else:
            rejected.append({**record, "reject_reason": reason})
    schema = {**synthetic.schema, **SUMMARY_SCHEMA}
    return StageOutput(tables={"rated": pl.DataFrame(kept, schema=schema)},
                       rejected={"rated": pl.DataFrame(rejected, schema={**schema, "reject_reason": STR})},
                       completions=completions)


def verdict_label(judgement: Judgement | str) -> str:
    return judgement.verdict if isinstance(judgement, Judgement) else judgement


def judge_all(
    cfg: PipelineConfig, executor: Executor, judge: EngineConfig, name: str, ids: list[str], problems: list[str],
    prompts: list[str],
) -> list[tuple[list[Judgement | str], list[Completion]]]:
    """Per problem: the judge's ratings_per_judge judgements, and every completion it took to get them.

    Round 0 asks for all ratings; each retry asks again, with a seed of its own (and, for a judge at temperature 0,
    its retry_temperature), for the judgements that do not count yet.
    """
    synth = cfg.synthesize
    judgements: list[list[Judgement | str]] = [[UNPARSED] * synth.ratings_per_judge for _ in problems]
    answered: list[list[Completion]] = [[] for _ in problems]
    for attempt in range(synth.rate_retries + 1):
        asked = [index for index, judged in enumerate(judgements)
                 if any(not isinstance(judgement, Judgement) for judgement in judged)]
        if not asked:
            break
        retry = [f"retry {attempt}"] if attempt else []
        requests = [
            role_request(attempt_role(judge, attempt), task="rate", fields={"problem": problems[index]}, text=prompts[index],
                         n=sum(not isinstance(j, Judgement) for j in judgements[index]),
                         seed=request_seed(cfg.seed, STEP, name, ids[index], *retry))
            for index in asked
        ]
        label = f"rate (judge {name})" + (f", retry {attempt}: {len(asked)} problems" if attempt else "")
        answers = executor.complete("judges", judge, requests, synth.shard_size, label)
        for index, samples in zip(asked, answers, strict=True):
            answered[index].extend(samples)
            slots = [slot for slot, judgement in enumerate(judgements[index]) if not isinstance(judgement, Judgement)]
            for slot, sample in zip(slots, samples, strict=True):
                judgements[index][slot] = read_judgement(sample)
    return list(zip(judgements, answered, strict=True))


STAGE = Stage(
    STEP, "Judges rate each problem; the keep rule decides.", rate, reads=("synthetic",), writes=("rated",),
    rejects=("rated",), settings=settings, roles=("judges",), section="synthesize", uses_executor=True,
    synthesis_step=True, funnel=True, command="sws synthesize --sub-steps rate", in_run=False)
DECLARED = (STAGE,)
