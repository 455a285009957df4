"""Rounds of `sws run --rounds N`: what a later round takes from the round before, and the weakness ledger.

Round 1 is the run directory itself; round r > 1 is the run directory `rounds/<r>/` (`RunDir.round`). A later
round runs the same stages as round 1 (`later_round_stages`: every stage of `sws run` but those that write the
tables wired from the round before), on three inputs the `rounds_inputs` step puts in its folder:

- `problems.parquet`: the round before's augmented set (seed problems and every round's kept synthetic ones);
- `rollouts.parquet`: the round before's augmented training log (what identify reads);
- `train/initial/final`: a link to the round before's augmented checkpoint, so augmented and baseline training,
  the band filter and `model: policy` all start from the policy that round ended with;
- `prior_weak.parquet`: the round before's weak problems, which `rounds.persist_weight` favours in the budget.

So round r + 1's augmented run trains from round r's augmented checkpoint on round r's augmented set plus the new
problems, and its baseline continues from the same checkpoint for the same steps on round r's augmented set.

After each round, `rounds_ledger` (in the run directory) rewrites `ledger.parquet` (one row per round and problem weak
in any round up to it) and `rounds_summary.parquet` (one row per round: weak problems by status, synthesis kept, the
headline, the judges' verdict shares, the share of band-filter problems solved in every rollout); it reads a later
round's tables as the run names them, `rounds/<r>/<table>`. With `rounds.reference_judge`, `rounds_reference` first
has that judge rate the round's generated problems.
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import polars as pl

from sws import ui
from sws.arms import arm, every_round
from sws.config import IdentifyConfig, PipelineConfig, with_overrides
from sws.current_policy import names_policy
from sws.errors import UserError
from sws.prompts import load_template
from sws.run_dir import RunDir, in_round
from sws.runner import REJECTED, StageContext, StageOutput
from sws.stage import Stage, run_stages
from sws.stages import eval as eval_stage
from sws.stages import rate

# The arm a later round continues: its policy, training set and rollout log are the next round's start.
CONTINUED = arm("augmented")
# The tables a later round takes from the round before instead of computing them.
WIRED_TABLES = ("problems", "rollouts")
STATUSES = ("new", "persisting", "resolved", "relapsed")
STILL_WEAK = ("new", "persisting", "relapsed")
VERDICT_SHARES = ("perfect", "acceptable", "bad", "unusable")
REFERENCE = "reference"
LEDGER_SCHEMA = {"round": pl.Int64, "problem_id": pl.Utf8, "category": pl.Utf8, "n_record": pl.Int64,
                 "weak": pl.Boolean, "evidence": pl.Utf8, "max_acc": pl.Float64, "slope": pl.Float64, "accuracy": pl.Float64,
                 "status": pl.Utf8}


def later_round_stages() -> tuple[Stage, ...]:
    """The stages of `sws run` a later round runs: all but those that write a table wired from the round before."""
    return tuple(stage for stage in run_stages() if not set(stage.writes) & set(WIRED_TABLES))


def later_round_config(cfg: PipelineConfig) -> PipelineConfig:
    """A later round's config: the run's, without evaluating the world's untrained start policy again."""
    checkpoints = [name for name in cfg.eval.checkpoints if name != "start"]
    return with_overrides(cfg, {"eval.checkpoints": checkpoints})


# ---------------------------------------------------------------- round inputs


def link_checkpoint(target: Path, link: Path) -> None:
    """`link` -> `target` (relative, so the run directory can move), replaced atomically."""
    link.parent.mkdir(parents=True, exist_ok=True)
    temporary = link.with_name(link.name + ".tmp")
    if temporary.is_symlink() or temporary.exists():
        temporary.unlink()
    os.symlink(os.path.relpath(target, link.parent), temporary)
    os.replace(temporary, link)


def wire_round(context: StageContext) -> StageOutput:
    """A later round's inputs from the round before (see the module's docstring)."""
    number = int(context.run.root.name)
    checkpoint = context.run.round_before.checkpoint(CONTINUED.name)
    if not (checkpoint / "config.json").is_file():
        raise UserError(f"{checkpoint}: not a trained model; rerun `sws run` to train round {number - 1}")
    problems, rollouts = context.table(CONTINUED.training_set), context.table(CONTINUED.rollouts)
    prior_weak = context.table("weakness").filter(pl.col("weak")).select("problem_id")
    link_checkpoint(checkpoint, context.run.initial_checkpoint)
    ui.info(f"round {number}: {problems.height} problems, {rollouts.height} rollout records and the policy "
            f"of round {number - 1} -> {context.run.root}")
    return StageOutput(tables={"problems": problems, "rollouts": rollouts, "prior_weak": prior_weak})


INPUTS = Stage(
    "rounds_inputs", "A later round's problems, rollout log and policy, from the round before.", wire_round,
    reads=(CONTINUED.training_set, CONTINUED.rollouts, "weakness"), writes=("problems", "rollouts", "prior_weak"),
    reads_from=lambda run: run.round_before,
    input_files=lambda cfg, run: [run.round_before.checkpoint(CONTINUED.name)],
    output_files=lambda cfg, run, options: [run.initial_checkpoint], section="rounds",
    command="sws run PIPELINE --rounds N", in_run=False)


# ---------------------------------------------------------------- the ledger


def evaluated_accuracy(eval_problems: pl.DataFrame | None) -> pl.DataFrame:
    """Per problem: the continued arm's share of right samples in the round's evaluation (weak and seed sets)."""
    if eval_problems is None:
        return pl.DataFrame(schema={"problem_id": pl.Utf8, "accuracy": pl.Float64})
    return (eval_problems.filter((pl.col("checkpoint") == CONTINUED.name)
                                 & pl.col("eval_set").is_in([eval_stage.WEAK_SET, eval_stage.SEED_SET]))
            .group_by("problem_id")
            .agg(accuracy=pl.when(pl.col("n").sum() > 0).then(pl.col("n_correct").sum() / pl.col("n").sum())))


def next_status(weak: bool | None, history: Sequence[str]) -> str:
    """A problem's status in a round from whether it is weak in it (None: no evidence) and its statuses in the
    rounds before (empty: never weak before).

    Weak: `new` the first time, `persisting` when it was still weak the round before, `relapsed` when it had been
    resolved. Not weak: `resolved`. No evidence: it keeps its state (a weak problem `persisting`, a resolved one
    `resolved`).
    """
    previous = history[-1] if history else None
    if weak is None:
        return "resolved" if previous == "resolved" else "persisting"
    if not weak:
        return "resolved"
    if previous is None:
        return "new"
    return "relapsed" if previous == "resolved" else "persisting"


def low_accuracy(accuracy: float, rule: IdentifyConfig) -> bool:
    """identify's accuracy threshold, applied to one accuracy."""
    return accuracy < rule.max_acc if rule.strict_max_acc else accuracy <= rule.max_acc


def ledger_table(weakness_by_round: Sequence[pl.DataFrame], accuracy_by_round: Sequence[pl.DataFrame],
                 rule: IdentifyConfig) -> pl.DataFrame:
    """One row per round and problem weak in that round or any round before it (see `next_status`).

    Whether a problem is weak in a round (`evidence`): identify's verdict when the round's rollout log rolled it
    out (`rollouts`); else, when the round before evaluated it, whether the augmented policy of that round (the
    policy this round starts from) stayed at or below identify's `max_acc` (`eval`); else no evidence (`none`).
    `accuracy` is the round's own evaluation of its augmented policy on the problem, when it evaluated it.
    """
    history: dict[str, list[str]] = {}
    rows: list[dict[str, Any]] = []
    earlier_accuracy: dict[str, float] = {}
    for number, (weakness, accuracy) in enumerate(zip(weakness_by_round, accuracy_by_round, strict=True), 1):
        observed = {row["problem_id"]: row for row in weakness.filter(pl.col("n_record") > 0).iter_rows(named=True)}
        for problem_id in weakness.filter(pl.col("weak"))["problem_id"]:
            history.setdefault(problem_id, [])
        accuracies = {key: value for key, value in accuracy.iter_rows() if value is not None}
        categories = dict(weakness.select("problem_id", "category").iter_rows())
        for problem_id, statuses in history.items():
            record = observed.get(problem_id)
            if record is not None:
                weak, evidence = record["weak"], "rollouts"
            elif problem_id in earlier_accuracy:
                weak, evidence = low_accuracy(earlier_accuracy[problem_id], rule), "eval"
            else:
                weak, evidence = None, "none"
            status = next_status(weak, statuses)
            statuses.append(status)
            rows.append({
                "round": number, "problem_id": problem_id, "category": categories.get(problem_id),
                "n_record": record["n_record"] if record else 0, "weak": weak, "evidence": evidence,
                "max_acc": record["max_acc"] if record else None, "slope": record["slope"] if record else None,
                "accuracy": accuracies.get(problem_id), "status": status,
            })
        earlier_accuracy = accuracies
    return pl.DataFrame(rows, schema=LEDGER_SCHEMA)


def verdict_shares(verdicts: Sequence[str], judges: Callable[[str], bool] = lambda name: True) -> dict[str, float | None]:
    """Shares of perfect, acceptable and bad among the verdicts of the judges `judges` accepts (by name, as `rate`
    names them: `<index>:<engine>/<model>`); `unusable`: unparsed or cut off."""
    counts = {name: 0 for name in VERDICT_SHARES}
    for verdict_lists in verdicts:
        for judge, judged in json.loads(verdict_lists).items():
            for verdict in judged if judges(judge) else ():
                counts[verdict if verdict in counts else "unusable"] += 1
    total = sum(counts.values())
    return {name: count / total if total else None for name, count in counts.items()}


def self_judges(cfg: PipelineConfig) -> Callable[[str], bool]:
    """Whether a judge (by its name in `rated.verdicts`) is the policy itself (`model: policy`)."""
    own = {str(index) for index, judge in enumerate(cfg.roles.judges or []) if names_policy(judge)}
    return lambda name: name.split(":", 1)[0] in own


def records_rounds(cfg: PipelineConfig) -> bool:
    """Whether `sws run` keeps the ledger and the per-round numbers: several rounds, a role played by the policy
    (self-evolving), or a reference judge to measure the judges against."""
    teachers = [cfg.roles.extractor, cfg.roles.generator, *(cfg.roles.judges or []), cfg.roles.labeler]
    return (cfg.rounds.n > 1 or cfg.rounds.reference_judge is not None
            or any(role is not None and names_policy(role) for role in teachers))


def reference_settings(cfg: PipelineConfig, options: dict) -> dict[str, Any]:
    judge, synth = cfg.rounds.reference_judge, cfg.synthesize
    return {"seed": cfg.seed, "judge": judge.model_dump(mode="json") if judge is not None else None,
            "ratings_per_judge": synth.ratings_per_judge, "rate_retries": synth.rate_retries,
            "prompt": load_template("rate", synth.prompt_dir, cfg.world).digest}


def rate_with_reference(context: StageContext) -> StageOutput:
    """`rounds.reference_judge` rates the round's generated problems as `rate` asks its judges
    (`reference_rated.parquet`); its verdicts decide nothing, they measure the round's judges."""
    cfg = context.cfg
    template = load_template("rate", cfg.synthesize.prompt_dir, cfg.world)
    synthetic = context.table("synthetic")
    ids, problems = synthetic["syn_id"].to_list(), synthetic["problem"].to_list()
    prompts = [template.render({"problem": problem}) for problem in problems]
    judged = rate.judge_all(cfg, context.executor, cfg.rounds.reference_judge, REFERENCE, ids, problems,
                            prompts) if problems else []
    verdicts = [json.dumps({REFERENCE: [rate.verdict_label(judgement) for judgement in judgements]})
                for judgements, _ in judged]
    return StageOutput(tables={"reference_rated": pl.DataFrame({"syn_id": ids, "verdicts": verdicts},
                                                               schema={"syn_id": pl.Utf8, "verdicts": pl.Utf8})})


REFERENCE_RATING = Stage(
    "rounds_reference", "A fixed judge rates the round's generated problems, to measure its judges.",
    rate_with_reference, reads=("synthetic",), writes=("reference_rated",), settings=reference_settings,
    section="rounds", uses_executor=True, command="sws run PIPELINE --rounds N", in_run=False,
    runs_when=lambda cfg: cfg.rounds.reference_judge is not None)


# What the ledger reads of each round, besides its weakness table: each when present.
LEDGER_READS = ("eval/problems", "rated", "rated" + REJECTED, "filtered", "filtered" + REJECTED, "reference_rated")


def round_row(cfg: PipelineConfig, table: Callable[[str], pl.DataFrame | None], summary: dict[str, Any],
              number: int, ledger: pl.DataFrame) -> dict[str, Any]:
    """One row of `rounds_summary.parquet` (see the module's docstring) from round `number`'s tables and summary."""
    in_round_rows = ledger.filter(pl.col("round") == number)
    counts = {f"n_{status}": int((in_round_rows["status"] == status).sum()) for status in STATUSES}
    earlier = ledger.filter(pl.col("round") < number)["problem_id"].unique()
    earlier_now = in_round_rows.filter(pl.col("problem_id").is_in(earlier.implode()))
    resolved_share = float((earlier_now["status"] == "resolved").mean()) if earlier_now.height else None
    frames = [frame for frame in (table("rated"), table("rated" + REJECTED)) if frame is not None]
    verdicts = [verdict for frame in frames for verdict in frame["verdicts"].to_list()]
    policy_judge = self_judges(cfg)
    shares = verdict_shares(verdicts, lambda name: not policy_judge(name))
    own_shares = verdict_shares(verdicts, policy_judge)
    scored = [frame.select("n", "n_correct") for frame in (table("filtered"), table("filtered" + REJECTED))
              if frame is not None and {"n", "n_correct"} <= set(frame.columns)]
    sampled = pl.concat(scored).filter(pl.col("n") > 0) if scored else pl.DataFrame()
    kept = table("filtered")
    reference = table("reference_rated")
    reference_shares = verdict_shares(reference["verdicts"].to_list()) if reference is not None else {}
    return {
        "round": number,
        "n_weak": int((in_round_rows["weak"].fill_null(False) & (in_round_rows["evidence"] == "rollouts")).sum()),
        **counts,
        "resolved_share": resolved_share,
        "n_kept": kept.height if kept is not None else 0,
        **{f"weak_solved_{each.name}": summary.get(f"weak_solved_{each.name}", {}).get("overall")
           for each in every_round()},
        **{f"judge_{name}": share for name, share in shares.items()},
        **{f"self_{name}": share for name, share in own_shares.items()},
        **{f"reference_{name}": reference_shares.get(name) for name in VERDICT_SHARES},
        "all_solved_share": float((sampled["n_correct"] == sampled["n"]).mean()) if sampled.height else None,
    }


def ledger_reads(cfg: PipelineConfig, adapt_round: int) -> tuple[str, ...]:
    """Every round's tables the ledger reads when present, as the run names them (`rounds.n` rounds at most)."""
    return (*(in_round(number, "weakness") for number in range(2, cfg.rounds.n + 1)),
            *(in_round(number, name) for number in range(1, cfg.rounds.n + 1) for name in LEDGER_READS))


def summaries(cfg: PipelineConfig, run: RunDir) -> list[Path]:
    return [run.round(number).summary for number in range(1, cfg.rounds.n + 1)
            if run.round(number).summary.is_file()]


def ledger_settings(cfg: PipelineConfig, options: dict) -> dict[str, Any]:
    return {"rounds": options["rounds"], "identify": cfg.identify.model_dump(mode="json"),
            "judges": [judge.model_dump(mode="json") for judge in cfg.roles.judges or []]}


def update_ledger(context: StageContext) -> StageOutput:
    """`ledger.parquet` and `rounds_summary.parquet` over rounds 1..`rounds` (a command option)."""
    rounds = range(1, context.options["rounds"] + 1)

    def table(number: int, name: str) -> pl.DataFrame | None:
        return context.tables.get(in_round(number, name))

    missing = [in_round(number, "weakness") for number in rounds if table(number, "weakness") is None]
    if missing:
        raise UserError(f"{context.source(missing[0])}: not found; rerun `sws run PIPELINE --rounds N` to finish "
                        "that round")
    weakness = [table(number, "weakness") for number in rounds]
    accuracy = [evaluated_accuracy(table(number, "eval/problems")) for number in rounds]
    ledger = ledger_table(weakness, accuracy, context.cfg.identify)

    def summary(number: int) -> dict[str, Any]:
        folder = context.run.round(number)
        return eval_stage.read_summary(folder.root) if folder.summary.is_file() else {}

    per_round = pl.DataFrame([round_row(context.cfg, functools.partial(table, number), summary(number), number, ledger)
                              for number in rounds])
    return StageOutput(tables={"ledger": ledger, "rounds_summary": per_round})


LEDGER = Stage(
    "rounds_ledger", "Every weak problem's status in every round, and each round's numbers.", update_ledger,
    reads=("weakness",), more_optional_reads=ledger_reads, writes=("ledger", "rounds_summary"),
    settings=ledger_settings, input_files=summaries, section="rounds", command="sws run PIPELINE --rounds N",
    in_run=False)


def stop_reason(cfg: PipelineConfig, per_round: pl.DataFrame) -> str | None:
    """Why `rounds.stop_when` ends the loop after the last round of `rounds_summary`, or None to go on."""
    rule = cfg.rounds.stop_when
    last = per_round.row(per_round.height - 1, named=True)
    if last["n_kept"] < rule.min_kept:
        return (f"round {last['round']}'s synthesis kept {last['n_kept']} problems, fewer than "
                f"rounds.stop_when.min_kept = {rule.min_kept}")
    shares = [share for share in per_round["resolved_share"].to_list() if share is not None]
    if rule.resolved_stops_rising and len(shares) >= 2 and shares[-1] <= shares[-2]:
        return (f"the share of earlier weak problems resolved stopped rising in round {last['round']} "
                f"({shares[-2]:.1%} then {shares[-1]:.1%}; rounds.stop_when.resolved_stops_rising)")
    return None


DECLARED = (INPUTS, LEDGER, REFERENCE_RATING)
