"""Rounds of `sws run --rounds N`: the wiring of a later round, the weakness ledger and the stop rule."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from sws import runner
from sws.config import IdentifyConfig, PipelineConfig, parse_config
from sws.errors import UserError
from sws.run_dir import RunDir
from sws.stages import rounds
from sws.tables import read_table, write_table


def weakness(rows: list[tuple[str, int, bool]]) -> pl.DataFrame:
    """(problem_id, n_record, weak) rows of a weakness table, in category `c`."""
    return pl.DataFrame({
        "problem_id": [row[0] for row in rows], "category": ["c"] * len(rows),
        "accs": [[0.0] * row[1] for row in rows], "n_record": [row[1] for row in rows],
        "max_acc": [0.0 if row[1] else None for row in rows], "slope": [0.0 if row[1] else None for row in rows],
        "weak": [row[2] for row in rows],
    }, schema_overrides={"max_acc": pl.Float64, "slope": pl.Float64, "accs": pl.List(pl.Float64)})


def accuracy(values: dict[str, float]) -> pl.DataFrame:
    return pl.DataFrame({"problem_id": list(values), "accuracy": list(values.values())},
                        schema={"problem_id": pl.Utf8, "accuracy": pl.Float64})


def statuses(ledger: pl.DataFrame, number: int) -> dict[str, str]:
    return dict(ledger.filter(pl.col("round") == number).select("problem_id", "status").iter_rows())


def test_a_later_round_runs_every_stage_but_those_that_write_the_wired_tables() -> None:
    names = [stage.name for stage in rounds.later_round_stages()]
    assert names == ["identify", "synthesize", "filter", "untargeted", "select", "select_random", "mix_random_selected",
                     "mix", "mix_selected", "oracle_family", "export", "train_continuations", "train_selection",
                     "train_upper_bound", "train_untargeted",
                     "cotrain_initial", "cotrain_cotrained", "cotrain_frozen", "cotrain_static", "cotrain_shuffled",
                     "eval", "report"]


def test_rounds_n_in_a_pipeline_file_is_short_for_the_section() -> None:
    assert parse_config({"rounds": 3}, "test").rounds.n == 3
    cfg = parse_config({"rounds": {"n": 2, "persist_weight": 2.0, "stop_when": {"min_kept": 5}}}, "test")
    assert (cfg.rounds.n, cfg.rounds.persist_weight, cfg.rounds.stop_when.min_kept) == (2, 2.0, 5)
    with pytest.raises(UserError, match="rounds"):
        parse_config({"rounds": 0}, "test")
    with pytest.raises(UserError, match="persist_weight"):  # 0 would leave a budget of nothing to share
        parse_config({"rounds": {"persist_weight": 0}}, "test")


def test_status_follows_each_weak_problem_across_rounds() -> None:
    rounds_weakness = [
        weakness([("a", 2, True), ("b", 2, True), ("c", 2, False)]),
        weakness([("a", 1, True), ("b", 3, False), ("c", 2, True)]),
        weakness([("a", 1, False), ("b", 2, True), ("c", 1, True)]),
    ]
    ledger = rounds.ledger_table(rounds_weakness, [accuracy({})] * 3, IdentifyConfig())
    assert statuses(ledger, 1) == {"a": "new", "b": "new"}
    assert statuses(ledger, 2) == {"a": "persisting", "b": "resolved", "c": "new"}
    assert statuses(ledger, 3) == {"a": "resolved", "b": "relapsed", "c": "persisting"}
    assert set(ledger["status"]) <= set(rounds.STATUSES)
    assert ledger.filter(pl.col("round") == 2)["evidence"].to_list() == ["rollouts"] * 3


def test_a_problem_the_log_never_rolled_out_is_judged_by_the_evaluation_before() -> None:
    first = weakness([("a", 2, True), ("b", 2, True), ("c", 2, True)])
    second = weakness([("a", 0, False), ("b", 0, False), ("c", 0, False)])
    # Round 1's evaluation of its augmented policy (the policy round 2 starts from): a solved, b not, c unseen.
    ledger = rounds.ledger_table([first, second], [accuracy({"a": 1.0, "b": 0.5}), accuracy({})], IdentifyConfig())
    second_round = ledger.filter(pl.col("round") == 2).sort("problem_id")
    assert second_round["status"].to_list() == ["resolved", "persisting", "persisting"]
    assert second_round["evidence"].to_list() == ["eval", "eval", "none"]
    assert second_round["weak"].to_list() == [False, True, None]
    assert ledger.filter(pl.col("round") == 1).sort("problem_id")["accuracy"].to_list() == [1.0, 0.5, None]


def test_verdict_shares_count_every_judge_and_unusable_verdicts() -> None:
    shares = rounds.verdict_shares([json.dumps({"0:j": ["perfect", "bad"]}),
                                    json.dumps({"0:j": ["perfect"], "1:k": ["unparsed"]})])
    assert shares == {"perfect": 0.5, "acceptable": 0.0, "bad": 0.25, "unusable": 0.25}
    assert rounds.verdict_shares([])["perfect"] is None


def summary_rows(rows: list[dict]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"round": pl.Int64, "n_weak": pl.Int64, "n_kept": pl.Int64,
                                      "resolved_share": pl.Float64})


def test_stop_rule() -> None:
    cfg = parse_config({"rounds": {"n": 5, "stop_when": {"resolved_stops_rising": True, "min_kept": 3}}}, "test")
    rising = summary_rows([{"round": 1, "n_weak": 9, "n_kept": 4, "resolved_share": None},
                           {"round": 2, "n_weak": 6, "n_kept": 4, "resolved_share": 0.3}])
    assert rounds.stop_reason(cfg, rising) is None
    flat = summary_rows([{"round": 1, "n_weak": 9, "n_kept": 4, "resolved_share": None},
                         {"round": 2, "n_weak": 6, "n_kept": 4, "resolved_share": 0.3},
                         {"round": 3, "n_weak": 6, "n_kept": 4, "resolved_share": 0.3}])
    assert "stopped rising in round 3" in rounds.stop_reason(cfg, flat)
    few = summary_rows([{"round": 1, "n_weak": 9, "n_kept": 2, "resolved_share": None}])
    assert "kept 2 problems, fewer than rounds.stop_when.min_kept = 3" in rounds.stop_reason(cfg, few)
    assert rounds.stop_reason(PipelineConfig(), few) is None


def problems_table(ids: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"problem_id": ids, "problem": [f"p {i}" for i in ids], "answer": ["1"] * len(ids),
                         "category": ["c"] * len(ids), "source": ["seed"] * len(ids)})


def finished_round_1(run_dir: Path) -> None:
    """The tables and augmented checkpoint round 2 takes from round 1 (contents beside the point)."""
    write_table(run_dir, "augmented", problems_table(["a", "b", "s"]))
    write_table(run_dir, "train/augmented/rollouts", pl.DataFrame(
        {"step": [0, 1], "problem_id": ["a", "s"], "n": [4, 4], "n_correct": [0, 4]}))
    write_table(run_dir, "weakness", weakness([("a", 2, True), ("b", 2, False)]))
    checkpoint = RunDir(run_dir).checkpoint("augmented")
    checkpoint.mkdir(parents=True)
    (checkpoint / "config.json").write_text("{}")


def test_a_later_round_takes_the_augmented_set_log_and_policy_of_the_round_before(tmp_path: Path) -> None:
    finished_round_1(tmp_path)
    runner.run(rounds.INPUTS, PipelineConfig(), RunDir(tmp_path).round(2).root)
    second = RunDir(tmp_path).round(2)
    assert second.root == tmp_path / "rounds" / "2"
    assert second.round_of == RunDir(tmp_path) and RunDir(tmp_path).round_of is None
    assert read_table(second.root, "problems")["problem_id"].to_list() == ["a", "b", "s"]
    assert read_table(second.root, "rollouts")["problem_id"].to_list() == ["a", "s"]
    assert read_table(second.root, "prior_weak")["problem_id"].to_list() == ["a"]
    assert second.initial_checkpoint.resolve() == RunDir(tmp_path).checkpoint("augmented").resolve()
    assert not Path(second.initial_checkpoint.readlink()).is_absolute()  # the run folder can move
    manifest = (second.manifest("rounds_inputs")).read_text()
    runner.run(rounds.INPUTS, PipelineConfig(), RunDir(tmp_path).round(2).root)
    assert second.manifest("rounds_inputs").read_text() == manifest  # current: skipped


def test_a_later_round_needs_the_round_before_to_be_trained(tmp_path: Path) -> None:
    finished_round_1(tmp_path)
    (RunDir(tmp_path).checkpoint("augmented") / "config.json").unlink()
    with pytest.raises(UserError, match="not a trained model"):
        runner.run(rounds.INPUTS, PipelineConfig(), RunDir(tmp_path).round(2).root)


# A chat template that hands the tiny arith policy a teacher's prompt as plain text.
PLAIN_TEXT = "{% for message in messages %}{{ message['content'] }}{% endfor %}"


@pytest.mark.slow
def test_a_self_evolving_round_measures_how_the_policy_rates_its_own_problems(tmp_path: Path) -> None:
    """The tiny arith policy plays judge and labeler (the oracle stays generator, and judges beside it so that
    problems reach the labeler); the round's numbers record the self-rating shares against a fixed judge."""
    from sws import pipeline

    policy = {"engine": "hf", "model": "policy", "temperature": 1.0, "max_tokens": 8,
              "options": {"chat_template": PLAIN_TEXT, "batch_size": 64}}
    cfg = parse_config({
        "seed": 0, "world": "arith",
        "arith": {"n_seed_problems": 48, "seed_levels": ["easy", "medium"], "bootstrap_steps": 40},
        "roles": {"judges": [policy, {"engine": "oracle", "model": "arith-oracle"}], "labeler": policy},
        "identify": {"max_acc": 0.75, "max_slope": 1.0},
        "synthesize": {"budget": 8, "levels": ["easy"], "label_samples": 2, "rate_retries": 0,
                       "min_consistency": 0.0, "adapt_rounds": 0},
        "train": {"initial_steps": 2, "batch_size": 4, "num_generations": 2, "save_steps": 1},
        "rounds": {"reference_judge": {"engine": "oracle", "model": "arith-oracle"}},
    }, "test")
    assert rounds.records_rounds(cfg)
    cfg = pipeline.with_seed_input(cfg, tmp_path)
    steps = pipeline.pipeline_steps(cfg)
    for step in steps[:[step.name for step in steps].index("synthesize") + 1]:
        step.run(cfg, tmp_path, False)
    runner.run(rounds.REFERENCE_RATING, cfg, tmp_path)
    runner.run(rounds.LEDGER, cfg, tmp_path, rounds=1)

    rated = pl.concat([read_table(tmp_path, "rated").select("verdicts"),
                       pl.read_parquet(RunDir(tmp_path).rejected("rated")).select("verdicts")])
    judges = {judge for verdicts in rated["verdicts"] for judge in json.loads(verdicts)}
    assert judges == {"0:hf/policy", "1:oracle/arith-oracle"}
    labeled = [pl.read_parquet(path) for path in (RunDir(tmp_path).table("labeled"), RunDir(tmp_path).rejected("labeled"))
               if path.exists()]
    assert sum(frame.height for frame in labeled) > 0  # the policy labeled the problems the judges kept
    row = read_table(tmp_path, "rounds_summary").row(0, named=True)
    for who in ("self", "judge", "reference"):
        shares = [row[f"{who}_{name}"] for name in rounds.VERDICT_SHARES]
        assert all(share is not None and 0.0 <= share <= 1.0 for share in shares), (who, shares)
        assert sum(shares) == pytest.approx(1.0)
    print({name: value for name, value in row.items() if name.startswith(("self_", "judge_", "reference_"))})


def test_the_ledger_reads_each_round_from_its_folder_and_needs_every_rounds_weakness(tmp_path: Path) -> None:
    from sws.atomic_files import write_json

    cfg = parse_config({"rounds": 3}, "test")
    second = RunDir(tmp_path).round(2)
    write_table(tmp_path, "weakness", weakness([("a", 2, True), ("b", 2, True)]))
    write_table(second.root, "weakness", weakness([("a", 2, False), ("b", 2, True)]))
    write_json(second.summary, {"weak_solved_augmented": {"overall": 0.5, "per_category": {}}})

    runner.run(rounds.LEDGER, cfg, tmp_path, rounds=2)

    ledger = read_table(tmp_path, "ledger")
    assert statuses(ledger, 2) == {"a": "resolved", "b": "persisting"}
    per_round = read_table(tmp_path, "rounds_summary")
    assert per_round["weak_solved_augmented"].to_list() == [None, 0.5]
    assert per_round["resolved_share"].to_list() == [None, 0.5]
    with pytest.raises(UserError, match=r"rounds/3/weakness.parquet: not found"):
        runner.run(rounds.LEDGER, cfg, tmp_path, rounds=3)


def two_rounds_with_their_ledger(run_dir: Path, cfg: PipelineConfig) -> bytes:
    """Round 1's and round 2's weakness tables and the ledger over them; the ledger's bytes."""
    write_table(run_dir, "weakness", weakness([("a", 2, True), ("b", 2, True)]))
    write_table(RunDir(run_dir).round(2).root, "weakness", weakness([("a", 2, False), ("b", 2, True)]))
    runner.run(rounds.LEDGER, cfg, run_dir, rounds=2)
    return RunDir(run_dir).ledger.read_bytes()


DAMAGES = {"truncated": lambda data: data[:50], "empty": lambda data: b"", "garbage": lambda data: b"\x00junk" * 99}


@pytest.mark.parametrize("damage", DAMAGES.values(), ids=DAMAGES.keys())
def test_a_damaged_ledger_is_rebuilt_from_the_rounds_tables(tmp_path: Path, damage, capsys) -> None:
    from sws import pipeline

    cfg = parse_config({"rounds": 2}, "test")
    ledger = RunDir(tmp_path).ledger
    written = two_rounds_with_their_ledger(tmp_path, cfg)
    ledger.write_bytes(damage(written))

    pipeline.rebuild_damaged_ledger(cfg, tmp_path)

    assert ledger.read_bytes() == written
    assert f"{ledger}: damaged; rebuilt from the tables of rounds 1-2" in capsys.readouterr().err
    assert statuses(read_table(tmp_path, "ledger"), 2) == {"a": "resolved", "b": "persisting"}


def test_a_ledger_the_rounds_tables_cannot_rebuild_is_one_line_and_nothing_is_lost(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from sws.cli import app

    cfg = parse_config({"rounds": 2}, "test")
    run = RunDir(tmp_path / "run")
    two_rounds_with_their_ledger(run.root, cfg)
    run.ledger.write_bytes(b"garbage")
    round_2_weakness = run.round(2).table("weakness")
    round_2_weakness.write_bytes(round_2_weakness.read_bytes()[:40])
    before = {path: path.read_bytes() for path in run.root.rglob("*") if path.is_file()}

    result = CliRunner().invoke(app, ["run", "quick", "--run", str(run.root), "--rounds", "2"])

    assert result.exit_code == 2, result.output
    [line] = result.stderr.splitlines()
    assert line.startswith(f"error: {run.ledger}: damaged, and not rebuilt from the rounds' tables: "
                           f"{round_2_weakness}: not a readable Parquet file")
    assert line.endswith("; delete it and rerun `sws run PIPELINE --rounds N --run "
                         f"{run.root}`, which writes it again")
    assert {path: path.read_bytes() for path in before} == before
