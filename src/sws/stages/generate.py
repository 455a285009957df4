"""`sws synthesize --sub-steps generate`: one new problem per concept set, then the pre-filters.

Reads `concept_sets.parquet`, `problems.parquet` (the seed set, for near-duplicates) and the files listed in
`synthesize.reference_files`; writes `synthetic.parquet` and `synthetic.rejected.parquet` (reasons:
truncated, refused (no problem, and the reply declines the request), unparsed, control_characters
(`sws.text_hygiene`), too_short, too_long, solution_leak, answer_leak, multiple_choice, true_false, proof,
multi_part, near_duplicate, contaminated; `reject_detail` names what a near-duplicate duplicates).
The generator is asked to stop where its problem ends: the template's `stop` strings (the starts of a solution
section that small models add after their problem) go to every engine. The problem is the text under the last
`### Problem` marker, cut where a solution starts (`sws.parsing.split_solution`). Truncation is judged on the
problem: a generation cut off at max_tokens after its problem ended keeps it; one cut off inside its problem
is rejected as `truncated`.
A set's `instance` k >= 1 (combine's fill of a small category's budget) puts a variant request into the prompt's
`{{request}}` ("This is variant k of this concept set: ..."), so a model writes another problem, not the same
one again. The manifest's `per_category` counts the problems generated, kept and dropped as near-duplicates.
In an adaptive round (`adapt_round` r >= 1, run by `sws filter`) the sets come from `sws.stages.adapt`: each
asks for an easier (or harder) problem on the concepts of one that the policy never (or always) solved, and
the problems of earlier rounds count as near-duplicates too.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from sws import ui
from sws.config import PipelineConfig
from sws.decontamination import benchmark_problems, closest_pairs, nearest_benchmarks
from sws.engines.base import Completion
from sws.fingerprints import config_hash
from sws.llm_calls import request_seed, role_request
from sws.near_duplicates import NearDuplicateIndex
from sws.parsing import parse_problem_and_end
from sws.problem_filters import prefilter_reason, refuses
from sws.prompts import PromptTemplate, load_template
from sws.runner import StageContext, StageOutput
from sws.stage import Stage
from sws.tables import STR, empty_table, round_name

STEP = "generate"
# A near-duplicate of a benchmark problem is `contaminated`, not `near_duplicate`.
REFERENCE_PREFIX = "reference:"
SYNTHETIC_SCHEMA = {**empty_table("synthetic").schema, "set_id": STR}
REJECTED_SCHEMA = {**SYNTHETIC_SCHEMA, "raw": STR, "reject_reason": STR, "reject_detail": STR}


def syn_id(set_id: str) -> str:
    """One problem per concept set, so the problem's id is its set's id under another prefix."""
    return "syn-" + set_id.removeprefix("set-")


def earlier_rounds(cfg: PipelineConfig, adapt_round: int) -> tuple[str, ...]:
    """The synthetic tables of the rounds before `adapt_round`, whose problems a new one must not repeat."""
    return tuple(round_name("synthetic", earlier) for earlier in range(adapt_round))


def near_duplicate_index(cfg: PipelineConfig, problems: pl.DataFrame, benchmarks: list[tuple[str, str]],
                         earlier: Sequence[pl.DataFrame] = ()) -> NearDuplicateIndex:
    """Seed problems, benchmark problems (`decontamination.benchmark_problems`) and earlier rounds' synthetic
    problems, which a new one must not duplicate."""
    index = NearDuplicateIndex(cfg.synthesize.near_duplicate_threshold, cfg.synthesize.near_duplicate_min_chars)
    for problem_id, problem in problems.select("problem_id", "problem").iter_rows():
        index.add(problem, f"seed:{problem_id}")
    for source, text in benchmarks:
        index.add(text, f"{REFERENCE_PREFIX}{source}")
    for synthetic in earlier:
        for syn, problem in synthetic.select("syn_id", "problem").iter_rows():
            index.add(problem, f"batch:{syn}")
    return index


def screen_generation(completion: Completion, min_chars: int, max_tokens: int) -> tuple[str | None, str | None]:
    """The problem a generation holds, and why it is rejected before any judge sees it (None: it passes).

    Truncation is judged on the problem: a reply cut off at max_tokens after the parser found where its problem
    ends (a solution or another section follows it) keeps its problem; one cut off inside the problem is
    `truncated`."""
    problem, ended = parse_problem_and_end(completion.text)
    if completion.truncated and not ended:
        return problem, "truncated"
    if problem is None and refuses(completion.text):
        return None, "refused"
    return problem, prefilter_reason(problem, min_chars, max_tokens)


def concepts_text(concepts: list[str]) -> str:
    return "\n".join(f"- {concept}" for concept in concepts)


ADAPT_REQUESTS = {
    "easier": "Write an easier problem on the same concepts than this one, which a student never solved:",
    "harder": "Write a harder problem on the same concepts than this one, which a student always solved:",
}


def extra_request(set_row: dict) -> str:
    """The prompt's `{{request}}`: another variant of a concept set (instance k >= 1), an easier or harder
    problem than a given one (adaptive rounds), or nothing."""
    if set_row.get("direction"):
        return f"{ADAPT_REQUESTS[set_row['direction']]}\n{set_row['source_problem']}\n"
    if set_row["instance"] == 0:
        return ""
    return (f"This is variant {set_row['instance'] + 1} of this concept set: use different numbers and wording "
            "from its other variants.\n")


def request_fields(set_row: dict) -> dict:
    """What the oracle reads of a generation request: the prompt's inputs."""
    fields = {name: set_row[name] for name in ("category", "level", "instance")} | {
        "concepts": list(set_row["concepts"])}
    if set_row.get("direction"):
        fields |= {"direction": set_row["direction"], "source_problem": set_row["source_problem"]}
    return fields


def per_category_counts(sets: pl.DataFrame, kept: list[dict], rejected: list[dict]) -> dict[str, dict[str, int]]:
    """Per category: problems generated, kept, and rejected as near-duplicates of earlier ones."""
    counts = {category: {"generated": 0, "kept": 0, "near_duplicate": 0, "contaminated": 0}
              for category in sets["category"]}
    for category in sets["category"]:
        counts[category]["generated"] += 1
    for record in kept:
        counts[record["category"]]["kept"] += 1
    for record in rejected:
        counts[record["category"]]["near_duplicate"] += record["reject_reason"] == "near_duplicate"
        counts[record["category"]]["contaminated"] += record["reject_reason"] == "contaminated"
    return counts


def template(cfg: PipelineConfig) -> PromptTemplate:
    return load_template("generate", cfg.synthesize.prompt_dir, cfg.world)


def settings(cfg: PipelineConfig, options: dict) -> dict:
    synth = cfg.synthesize
    decided = {
        "seed": cfg.seed, "generator": cfg.roles.generator.model_dump(mode="json"), "prompt": template(cfg).digest,
        "min_problem_chars": synth.min_problem_chars, "max_problem_tokens": synth.max_problem_tokens,
        "near_duplicate_threshold": synth.near_duplicate_threshold,
        "near_duplicate_min_chars": synth.near_duplicate_min_chars,
    }
    benchmarks = benchmark_problems(cfg)
    if benchmarks:  # a run without benchmark problems keeps its manifest
        decided |= {"benchmarks": config_hash(benchmarks), "contamination_similarity": synth.contamination_similarity,
                    "embedder": cfg.roles.embedder.model}
    return decided


def generate(context: StageContext) -> StageOutput:
    """One problem per concept set; the pre-filters, near-duplicates and contamination reject some."""
    cfg = context.cfg
    synth = cfg.synthesize
    prompt = template(cfg)
    benchmarks = benchmark_problems(cfg)
    sets = context.table("concept_sets")
    seen = near_duplicate_index(cfg, context.table("problems"), benchmarks,
                                [context.table(name) for name in earlier_rounds(cfg, context.adapt_round)])
    role = cfg.roles.generator
    requests = [
        role_request(
            role, task="generate", fields=request_fields(row),
            text=prompt.render({"category": row["category"], "concepts": concepts_text(row["concepts"]),
                                "level": row["level"], "request": extra_request(row)}),
            n=1, seed=request_seed(cfg.seed, STEP, row["set_id"]), stop=prompt.stop,
        )
        for row in sets.iter_rows(named=True)
    ]
    if not requests:
        ui.info(f"{STEP}: {context.source('concept_sets')} is empty; no problems to generate")
    completions = context.executor.complete("generator", role, requests, synth.shard_size, "generate problems")
    kept, rejected, raw_of = [], [], {}
    for row, answers in zip(sets.iter_rows(named=True), completions, strict=True):
        raw = raw_of[syn_id(row["set_id"])] = answers[0].text
        problem, reason = screen_generation(answers[0], synth.min_problem_chars, synth.max_problem_tokens)
        record = {"syn_id": syn_id(row["set_id"]), "category": row["category"], "concepts": row["concepts"],
                  "level": row["level"], "problem": problem, "set_id": row["set_id"]}
        duplicate_of = seen.find(problem) if reason is None and problem is not None else None
        if reason is None and duplicate_of is None:
            seen.add(problem, f"batch:{record['syn_id']}")
            kept.append(record)
        else:
            duplicate_reason = "contaminated" if (duplicate_of or "").startswith(REFERENCE_PREFIX) else "near_duplicate"
            rejected.append({**record, "raw": raw, "reject_reason": reason or duplicate_reason,
                             "reject_detail": duplicate_of})
    kept, contaminated, pairs = screen_contamination(cfg, context.run.root, kept, benchmarks)
    rejected += [{**record, "raw": raw_of[record["syn_id"]], "reject_reason": "contaminated", "reject_detail": detail}
                 for record, detail in contaminated]
    info = {"per_category": per_category_counts(sets, kept, rejected)}
    if pairs:
        info["closest_benchmark_pairs"] = pairs
    return StageOutput(tables={"synthetic": pl.DataFrame(kept, schema=SYNTHETIC_SCHEMA)},
                       rejected={"synthetic": pl.DataFrame(rejected, schema=REJECTED_SCHEMA)}, info=info,
                       rows_in=sets.height, completions=[completion for answers in completions for completion in answers])


def screen_contamination(cfg: PipelineConfig, cache_run: Path, kept: list[dict], benchmarks: list[tuple[str, str]]
                         ) -> tuple[list[dict], list[tuple[dict, str]], list[dict]]:
    """(kept, [(contaminated record, why)], the closest pairs) by embedding similarity to the benchmarks; the
    embeddings are cached in run `cache_run`."""
    threshold = cfg.synthesize.contamination_similarity
    if threshold is None or not kept or not benchmarks:
        return kept, [], []
    problems = [record["problem"] for record in kept]
    nearest = nearest_benchmarks(problems, benchmarks, cfg, cache_run)
    clean, contaminated = [], []
    for record, match in zip(kept, nearest, strict=True):
        if match.similarity >= threshold:
            contaminated.append((record, f"{REFERENCE_PREFIX}{match.source} (cosine {match.similarity:.3f}): "
                                         f"{match.benchmark_problem[:120]}"))
        else:
            clean.append(record)
    return clean, contaminated, closest_pairs(problems, nearest)


STAGE = Stage(
    STEP, "The generator writes one problem per concept set; pre-filters reject bad ones.", generate,
    reads=("concept_sets", "problems"), writes=("synthetic",), rejects=("synthetic",), more_reads=earlier_rounds,
    settings=settings, roles=("generator",), section="synthesize", uses_executor=True, synthesis_step=True,
    funnel=True, command="sws synthesize --sub-steps generate", in_run=False)
DECLARED = (STAGE,)
