from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from _synthesis_run import ScriptedEngine, noisy_oracle_config, scripted_role, use_engines

from sws import runner
from sws.config import PipelineConfig, parse_config
from sws.errors import UserError
from sws.stages import rate
from sws.tables import read_parquet, read_table, rejected_path, write_table
from sws.worlds.arith import solve

PROBLEMS = ["Compute 12*13.", "Compute 14*15.", "Compute 16*17.", "Compute 18*19.", "Compute 21*22.",
            "Compute 23*24."]


def write_synthetic(run_dir: Path, problems: list[str]) -> None:
    n = len(problems)
    write_table(run_dir, "synthetic", pl.DataFrame({
        "syn_id": [f"syn-{index}" for index in range(n)], "category": ["multiplication"] * n,
        "concepts": [["multiplication"]] * n, "level": ["medium"] * n, "problem": problems,
    }, schema={"syn_id": pl.Utf8, "category": pl.Utf8, "concepts": pl.List(pl.Utf8), "level": pl.Utf8,
               "problem": pl.Utf8}))


ANALYSIS = "Standalone, a single numeric answer, no parts, no hints, well-posed."


def judge_saying(verdicts_by_problem: dict[str, list[str]]) -> ScriptedEngine:
    """A judge whose k-th sample on a problem is an analysis and the k-th scripted verdict line."""
    return ScriptedEngine(lambda request, k: f"{ANALYSIS}\n{verdicts_by_problem[request.fields['problem']][k]}")


def test_keep_rule_counts_unparsed_verdicts_against_the_perfect_share(tmp_path: Path, monkeypatch) -> None:
    scripted = {
        PROBLEMS[0]: ["Verdict: perfect", "Verdict: perfect"],
        PROBLEMS[1]: ["Verdict: perfect", "**Verdict:** acceptable"],
        PROBLEMS[2]: ["Verdict: acceptable", "Verdict: acceptable"],
        PROBLEMS[3]: ["Verdict: perfect", "Verdict: bad"],
        PROBLEMS[4]: ["Verdict: perfect", "I think it is fine."],
        PROBLEMS[5]: ["No verdict.", "Verdict: splendid"],
    }
    write_synthetic(tmp_path, PROBLEMS)
    use_engines(monkeypatch, {"judge": judge_saying(scripted)})
    config = PipelineConfig()
    config.roles.judges = [scripted_role("judge")]
    config.synthesize.ratings_per_judge = 2
    config.synthesize.rate_retries = 0
    result = runner.run(rate.STAGE, config, tmp_path)
    kept = read_table(tmp_path, "rated")
    rejected = read_parquet(rejected_path(tmp_path, "rated"))
    assert kept["problem"].to_list() == [PROBLEMS[0], PROBLEMS[1], PROBLEMS[4]]
    assert dict(zip(rejected["problem"], rejected["reject_reason"], strict=True)) == {
        PROBLEMS[2]: "low_perfect_ratio", PROBLEMS[3]: "bad_verdict", PROBLEMS[5]: "unparsed_verdicts",
    }
    row = kept.filter(pl.col("problem") == PROBLEMS[4]).row(0, named=True)
    assert row["n_unparsed"] == 1 and row["perfect_ratio"] == 0.5
    assert json.loads(row["verdicts"]) == {"0:oracle/judge": ["perfect", "unparsed"]}
    assert result.info["funnel"]["rejected"] == {"bad_verdict": 1, "low_perfect_ratio": 1, "unparsed_verdicts": 1}


def test_allow_bad_and_threshold_are_options(tmp_path: Path, monkeypatch) -> None:
    scripted = {PROBLEMS[0]: ["Verdict: perfect", "Verdict: bad"], PROBLEMS[1]: ["Verdict: acceptable"] * 2}
    write_synthetic(tmp_path, PROBLEMS[:2])
    use_engines(monkeypatch, {"judge": judge_saying(scripted)})
    config = PipelineConfig()
    config.roles.judges = [scripted_role("judge")]
    config.synthesize.ratings_per_judge = 2
    config.synthesize.allow_bad = True
    config.synthesize.min_perfect_ratio = 0.0
    runner.run(rate.STAGE, config, tmp_path)
    assert read_table(tmp_path, "rated").height == 2


def test_verdicts_are_kept_per_judge(tmp_path: Path, monkeypatch) -> None:
    write_synthetic(tmp_path, PROBLEMS[:1])
    strict = ScriptedEngine(lambda request, k: f"{ANALYSIS}\nVerdict: bad")
    lenient = ScriptedEngine(lambda request, k: f"{ANALYSIS}\nVerdict: perfect")
    use_engines(monkeypatch, {"strict": strict, "lenient": lenient})
    config = PipelineConfig()
    config.roles.judges = [scripted_role("strict"), scripted_role("lenient")]
    runner.run(rate.STAGE, config, tmp_path)
    rejected = read_parquet(rejected_path(tmp_path, "rated"))
    assert json.loads(rejected["verdicts"][0]) == {"0:oracle/strict": ["bad"], "1:oracle/lenient": ["perfect"]}
    assert strict.requests[0].task == "rate" and set(strict.requests[0].fields) == {"problem"}
    assert PROBLEMS[0] in strict.requests[0].messages[0]["content"]


def test_accurate_oracle_judge_removes_exactly_the_defective_problems(tmp_path: Path) -> None:
    problems = [*PROBLEMS[:3], "Compute 12*x.", "Compute 17 mod 0.", "Compute 45+12 plus some number."]
    write_synthetic(tmp_path, problems)
    runner.run(rate.STAGE, noisy_oracle_config(judge_error=0.0), tmp_path)
    rejected = read_parquet(rejected_path(tmp_path, "rated"))
    assert sorted(rejected["problem"]) == sorted(problems[3:])
    assert all(solve(problem).kind == "ill_posed" for problem in rejected["problem"])


def test_unusable_judgements_are_asked_again_and_the_analyses_are_kept(tmp_path: Path, monkeypatch) -> None:
    asked: dict[str, int] = {}

    def rubber_stamp_first(request, k: int) -> str:
        problem = request.fields["problem"]
        asked[problem] = asked.get(problem, 0) + 1
        if problem == PROBLEMS[1] or asked[problem] == 1:
            return "Verdict: perfect"  # no analysis: does not count
        return f"{ANALYSIS}\nVerdict: perfect"

    write_synthetic(tmp_path, PROBLEMS[:2])
    judge = ScriptedEngine(rubber_stamp_first)
    use_engines(monkeypatch, {"judge": judge})
    config = PipelineConfig()
    config.roles.judges = [scripted_role("judge")]
    config.synthesize.rate_retries = 3
    runner.run(rate.STAGE, config, tmp_path)

    kept = read_table(tmp_path, "rated").row(0, named=True)
    assert kept["problem"] == PROBLEMS[0]
    assert json.loads(kept["reasoning"]) == {"0:oracle/judge": [ANALYSIS]}
    rejected = read_parquet(rejected_path(tmp_path, "rated")).row(0, named=True)
    assert rejected["reject_reason"] == "unparsed_verdicts"
    assert asked == {PROBLEMS[0]: 2, PROBLEMS[1]: 4}  # one retry settles the first; the second uses all three
    assert len({request.seed for request in judge.requests}) == len(judge.requests) == 6  # a new seed each time


@pytest.mark.parametrize(("temperature", "retried_at"), [(0.0, 0.5), (0.3, 0.3)])
def test_a_retry_at_temperature_0_samples_at_the_retry_temperature(tmp_path: Path, monkeypatch, temperature: float,
                                                                    retried_at: float) -> None:
    write_synthetic(tmp_path, PROBLEMS[:2])
    judge = ScriptedEngine(lambda request, k: "Verdict: perfect")  # never counts
    use_engines(monkeypatch, {"judge": judge})
    config = PipelineConfig()
    config.roles.judges = [scripted_role("judge").model_copy(update={"temperature": temperature,
                                                                     "retry_temperature": 0.5})]
    config.synthesize.rate_retries = 2
    runner.run(rate.STAGE, config, tmp_path)
    assert [request.temperature for request in judge.requests] == [temperature] * 2 + [retried_at] * 4
    # At temperature 0 the seed does not change the reply: no problem is asked twice at 0.
    greedy = [request.fields["problem"] for request in judge.requests if request.temperature == 0]
    assert len(greedy) == len(set(greedy))


def test_a_cut_off_judgement_does_not_count(tmp_path: Path, monkeypatch) -> None:
    from sws.engines import Completion

    class CutOffJudge(ScriptedEngine):
        def generate(self, requests):
            self.requests.extend(requests)
            return [[Completion(f"{ANALYSIS}\nVerdict: perfect", 9, "length")] * r.n for r in requests]

    write_synthetic(tmp_path, PROBLEMS[:1])
    use_engines(monkeypatch, {"judge": CutOffJudge(lambda request, k: "")})
    config = PipelineConfig()
    config.roles.judges = [scripted_role("judge")]
    result = runner.run(rate.STAGE, config, tmp_path)
    rejected = read_parquet(rejected_path(tmp_path, "rated")).row(0, named=True)
    assert rejected["reject_reason"] == "truncated" and rejected["n_truncated"] == 1
    assert result.info["funnel"]["truncated"] == 3 == result.info["funnel"]["completions"]


def test_an_empty_judge_list_is_rejected_with_the_config_before_any_step_runs() -> None:
    with pytest.raises(UserError, match="roles.judges"):
        parse_config({"roles": {"judges": []}}, "pipeline.yaml")


def test_missing_synthetic_names_the_command(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="sws synthesize --sub-steps generate"):
        runner.run(rate.STAGE, PipelineConfig(), tmp_path)
