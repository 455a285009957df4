import base64
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import polars as pl
import pytest

from sws import runner
from sws.atomic_files import write_json
from sws.config import EngineConfig, PipelineConfig
from sws.funnel import funnel_row
from sws.manifests import StageResult, environment
from sws.run_dir import RunDir
from sws.runner import commit_stage
from sws.stages import eval as eval_stage
from sws.stages import filter as filter_stage
from sws.stages import report
from sws.tables import SCHEMAS, write_rejected, write_table

CATEGORIES = ["addition", "remainders"]


def write_funnel(run_dir: Path, step: str, rows_in: int, kept: int, reasons: list[str]) -> None:
    row = funnel_row(step, rows_in, kept, reasons)
    commit_stage(run_dir, step, config={}, inputs=[], outputs=[],
              body=lambda: StageResult(step, info={"funnel": row.as_info()}))


def per_problem_eval(arms: tuple = (("initial", 0), ("baseline", 1), ("augmented", 2))) -> pl.DataFrame:
    """Of 4 weak problems each checkpoint solves its number; weak_like: only augmented solves them."""
    rows = []
    for checkpoint, solved in arms:
        for i in range(4):
            rows.append({"checkpoint": checkpoint, "eval_set": "weak", "problem_id": f"w{i}",
                         "category": CATEGORIES[i % 2], "greedy_correct": i < solved, "n": 4, "n_correct": i})
            rows.append({"checkpoint": checkpoint, "eval_set": "seed", "problem_id": f"s{i}",
                         "category": CATEGORIES[i % 2], "greedy_correct": True, "n": 4, "n_correct": 4 - i})
            rows.append({"checkpoint": checkpoint, "eval_set": "weak_like", "problem_id": f"like-w{i}",
                         "category": CATEGORIES[i % 2], "greedy_correct": checkpoint == "augmented", "n": 4,
                         "n_correct": 0})
    return pl.DataFrame(rows, schema=SCHEMAS["eval/problems"])


@pytest.fixture(scope="module")
def full_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp_path = tmp_path_factory.mktemp("full_run")
    write_table(tmp_path, "categories", pl.DataFrame({
        "category": CATEGORIES, "n_problems": [10, 10], "n_weak": [1, 6], "fail_ratio": [0.1, 0.6],
        "share": [0.14, 0.86]}))
    write_table(tmp_path, "weakness", pl.DataFrame({
        "problem_id": ["w0", "w1", "ok"], "category": ["addition", "remainders", "addition"],
        "accs": [[0.0, 0.25, 0.0], [0.5, 0.25, 0.25], [0.5, 1.0]], "n_record": [3, 3, 2],
        "max_acc": [0.25, 0.5, 1.0], "slope": [0.0, -0.125, 0.5], "weak": [True, True, False]}))
    filtered = pl.DataFrame({"syn_id": ["x1", "x2"], "category": ["remainders"] * 2, "problem": ["a", "b"],
                             "answer": ["1", "2"], "n": [8, 8], "n_correct": [2, 6], "accuracy": [0.25, 0.75],
                             "round": [0, 1]})
    write_table(tmp_path, "filtered", filtered)
    write_rejected(tmp_path, "filtered", filtered.with_columns(
        pl.Series("syn_id", ["x3", "x4"]), pl.Series("accuracy", [0.0, 1.0]),
        pl.lit("outside_band").alias("reject_reason")))
    filter_stage.plot_accuracies([0.25, 0.75, 0.0, 1.0], (0.25, 0.75), 8, RunDir(tmp_path).plots / filter_stage.PLOT_NAME)
    for kind, level in (("initial", 0.3), ("baseline", 0.5), ("augmented", 0.6)):
        write_table(tmp_path, f"train/{kind}/curve", pl.DataFrame({
            "step": [1, 2, 3], "reward": [level, level + 0.1, level + 0.2], "reward_std": [0.1] * 3,
            "loss": [0.0] * 3}))
    per_problem = per_problem_eval()
    write_table(tmp_path, "eval/problems", per_problem)
    write_table(tmp_path, eval_stage.SETS, eval_stage.sets_table([
        eval_stage.EvalSet(name, per_problem.filter((pl.col("eval_set") == name) & (pl.col("checkpoint") == "initial"))
                           .select("problem_id", "problem", pl.lit("1").alias("answer"), "category"), 4,
                           held_out=name == "weak_like")
        for name in ("seed", "weak", "weak_like")]))
    write_table(tmp_path, "eval/benchmarks", eval_stage.benchmark_table(per_problem))
    write_table(tmp_path, "eval/weakness", eval_stage.weakness_table(per_problem))
    benchmarks = eval_stage.benchmark_table(per_problem)
    sets = [eval_stage.EvalSet("weak_like", pl.DataFrame(), 16, benchmark=True, held_out=True)]
    for kind, draws in (("baseline", [(1, "w0"), (2, "w0"), (3, "w0"), (1, "w1"), (2, "ok")]),
                        ("augmented", [(1, "w0"), (2, "x1"), (3, "x2")])):
        write_table(tmp_path, f"train/{kind}/rollouts", pl.DataFrame(
            {"step": [step for step, _ in draws], "problem_id": [problem for _, problem in draws], "n": 8,
             "n_correct": 1}, schema=SCHEMAS[f"train/{kind}/rollouts"]))
    write_json(RunDir(tmp_path).summary, {
        **eval_stage.summary(eval_stage.weakness_table(per_problem), ["initial", "baseline", "augmented"],
                             benchmarks, {}),
        **eval_stage.standard_errors(per_problem, ["initial", "baseline", "augmented"]),
        **eval_stage.benchmark_summary(benchmarks, sets),
        **eval_stage.held_out_summary(per_problem.with_columns(pl.lit("Compute 1+1.").alias("problem")),
                                      ["weak_like"], pl.DataFrame({"key": ["compute 2+2"]})),
        "environment": environment()})
    rated = pl.DataFrame({
        "syn_id": ["s1", "s2", "s3", "s4"], "category": ["remainders"] * 3 + ["addition"],
        "concepts": [["remainders"]] * 4, "level": ["easy"] * 4,
        "problem": ["Compute 17 mod 5.", "Compute 19 mod 4.", "Compute 23 mod 7.", "Compute 2+2."],
        "verdicts": ['{"0:oracle/j": ["perfect"]}'] * 3 + ['{"0:oracle/j": ["unparsed"]}'],
        "reasoning": [json.dumps({"0:oracle/j": [f"Remainder analysis {i}."]}) for i in range(3)]
        + ['{"0:oracle/j": [""]}'],
    })
    write_table(tmp_path, "rated", rated)
    write_funnel(tmp_path, "extract", 7, 7, [])
    write_funnel(tmp_path, "generate", 20, 15, ["multi_part"] * 3 + ["proof"] * 2)
    write_funnel(tmp_path, "filter", 4, 2, ["too hard", "too easy"])
    runner.run(report.STAGE, PipelineConfig(), tmp_path)  # every teacher role defaults to the arith oracle
    return tmp_path


@pytest.fixture(scope="module")
def page(full_run: Path) -> str:
    return RunDir(full_run).report.read_text()


def sections(page: str) -> dict[str, str]:
    parts = re.findall(r'<section id="s\d+"><h2>(.*?)</h2>(.*?)</section>', page, re.DOTALL)
    return dict(parts)


def test_every_section_is_drawn_from_the_run(full_run: Path, page: str) -> None:
    found = sections(page)
    assert len(found) == len(report.SECTIONS)
    assert not any("Not available" in body for body in found.values())
    images = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', page)
    # every plot but weakness mitigation's: no category has 10 weak problems
    assert len(images) == 5
    assert all(base64.b64decode(image).startswith(b"\x89PNG") for image in images)
    assert len(list((full_run / "plots" / "report").glob("*.png"))) == 4
    assert "multi_part 3" in page and "proof 2" in page and "0 of 0" in page
    # two analyses per category; a judgement without one is not shown
    assert "Remainder analysis 0." in page and "Remainder analysis 1." in page
    assert "Remainder analysis 2." not in page and "Compute 2+2." not in page
    assert "2 of 4 labeled problems in the band [0.25, 0.75]" in page
    band = next(body for title, body in found.items() if title.startswith("Difficulty band"))
    assert "<th>round 0</th><th>round 1</th>" in band and "<td>remainders</td><td>1</td><td>1</td>" in band


class SectionParser(HTMLParser):
    """Each <section>'s heading and the tags and cell texts in it, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[dict] = []
        self.open: str | None = None

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag == "section":
            self.sections.append({"title": "", "tags": [], "headers": [], "cells": []})
        elif self.sections:
            self.sections[-1]["tags"].append(tag)
        self.open = tag

    def handle_data(self, data: str) -> None:
        if not self.sections:
            return
        keys = {"h2": "title", "th": "headers", "td": "cells"}
        if self.open == "h2":
            self.sections[-1]["title"] += data
        elif self.open in keys:
            self.sections[-1][keys[self.open]].append(data)


def test_the_report_opens_with_each_arm_on_the_held_out_sets_and_the_differences(page: str) -> None:
    parser = SectionParser()
    parser.feed(page)
    first = parser.sections[0]
    assert first["title"] == "The answer: each arm on the held-out sets"
    assert first["tags"][:2] == ["h2", "table"]
    assert first["headers"] == ["arm, or difference", "weak_like (n=4)"]
    # weak_like: no arm gets a sample right, so each share is 0 with no spread and the difference is not marked
    assert first["cells"] == ["seed only", "0.0 % ± 0.0", "synthetic", "0.0 % ± 0.0",
                              "synthetic − seed only", "+0.0 ± 0.0 pts"]
    assert parser.sections[-1]["title"] == "Stage timings"


def test_page_is_self_contained(page: str) -> None:
    assert not re.search(r'(src|href)="(?!data:|#)', page)
    assert "<link" not in page and "<script" not in page


def test_oracle_is_labelled_a_rule_based_stand_in(full_run: Path, page: str) -> None:
    assert "rule-based stand-in for teacher models" in page

    real = EngineConfig(engine="vllm", model="Qwen/Qwen2.5-7B-Instruct")
    cfg = PipelineConfig.model_validate({"roles": {
        "extractor": real.model_dump(), "generator": real.model_dump(), "labeler": real.model_dump(),
        "judges": [real.model_dump()]}})
    runner.run(report.STAGE, cfg, full_run, force=True)
    assert "rule-based stand-in" not in RunDir(full_run).report.read_text()
    runner.run(report.STAGE, PipelineConfig(), full_run, force=True)


def test_weakness_mitigation_table_shows_each_checkpoint(page: str) -> None:
    body = sections(page)[
        "Weakness mitigation: share of the previously weak problems each policy solves"]
    header = re.search(r"<thead>(.*?)</thead>", body).group(1)
    assert [h for h in re.findall(r"<th>(.*?)</th>", header)] == ["category", "initial", "seed only", "synthetic",
                                                                  "n_weak"]
    overall = re.search(r"<tr><td>overall</td>(.*?)</tr>", body).group(1)
    assert re.findall(r"<td>(.*?)</td>", overall) == ["0.000", "0.250", "0.500", "4"]


def test_weakness_mitigation_also_shows_fresh_problems_of_the_weak_families(page: str) -> None:
    body = sections(page)[
        "Weakness mitigation: share of the previously weak problems each policy solves"]
    assert "Fresh problems of the weak problems" in body
    overall_rows = re.findall(r"<tr><td>overall</td>(.*?)</tr>", body)
    assert re.findall(r"<td>(.*?)</td>", overall_rows[-1]) == ["0.000", "0.000", "1.000"]


def test_weakness_mitigation_gives_each_share_with_its_standard_error(page: str) -> None:
    body = sections(page)["Weakness mitigation: share of the previously weak problems each policy solves"]
    assert "<th>greedy SE</th>" in body and "<th>avg@k SE</th>" in body
    # weak: baseline solves 1 of 4 greedily, augmented 2 of 4; augmented − baseline per problem 0, 1, 0, 0
    difference = re.search(r"<tr><td>weak</td><td>augmented − baseline</td>(.*?)</tr>", body).group(1)
    assert re.findall(r"<td>(.*?)</td>", difference)[:2] == ["0.250", "0.250"]


def test_weakness_mitigation_says_how_often_each_arm_drew_the_weak_problems(page: str) -> None:
    body = sections(page)["Weakness mitigation: share of the previously weak problems each policy solves"]
    rows = {cells[0]: cells[1:] for cells in (re.findall(r"<td>(.*?)</td>", row)
                                              for row in re.findall(r"<tr>(.*?)</tr>", body)) if cells}
    # each arm by its one name (the answer table's): baseline is "seed only", augmented "synthetic"
    assert rows["seed only"] == ["2.000", "1.667", "0"]  # w0 in 3 steps, w1 in 1; 5 draws of 3 problems
    assert rows["synthetic"] == ["0.500", "1.000", "1"]


def test_teachability_and_gradient_share(page: str) -> None:
    body = sections(page)[
        "Teachability and gradient-bearing share of every problem set"]
    rows = {tuple(re.findall(r"<td>(.*?)</td>", row)[:2]): re.findall(r"<td>(.*?)</td>", row)[2:]
            for row in re.findall(r"<tr>(<td>.*?)</tr>", body)}
    # seed accuracies under initial: 1, .75, .5, .25 -> teachability 0, .5, 1, .5; gradient share 3/4
    assert rows[("seed", "initial")] == ["4", "0.625", "0.500", "0.750"]
    # synthetic in band: .25 and .75 -> teachability .5 each, both gradient-bearing
    assert rows[("synthetic (in band)", "initial")] == ["2", "0.500", "0.500", "1.000"]
    # all labeled: + 0 and 1 -> never gradient-bearing
    assert rows[("synthetic (labeled)", "initial")] == ["4", "0.500", "0.250", "0.500"]
    assert rows[("augmented", "initial")][0] == "6"


def test_missing_artifacts_name_the_command_that_makes_them(tmp_path: Path) -> None:
    runner.run(report.STAGE, PipelineConfig(), tmp_path)
    found = sections(RunDir(tmp_path).report.read_text())
    assert "sws identify" in found["Categories: fail ratio and synthesis budget"]
    assert "sws filter" in found["Difficulty band: accuracy of the initial policy on the labeled synthetic problems"]
    assert "sws eval" in found["Evaluation: Pass@1 (greedy) and Avg@k"]
    assert "sws train initial" in found["Training curves"]


def test_benchmarks_section_gives_each_benchmarks_k_the_average_and_held_out_overlap(page: str) -> None:
    body = next(body for title, body in sections(page).items() if title.startswith("Benchmarks"))
    assert "<td>synthetic</td><td>weak_like</td><td>16</td><td>4</td><td>1.000</td><td>0.000</td>" in body
    assert "<td>synthetic</td><td>average</td><td>–</td><td>–</td><td>1.000</td><td>0.000</td>" in body
    assert "<td>weak_like</td><td>4</td><td>0</td>" in body


def test_contamination_section_lists_the_closest_pairs_from_generate(tmp_path: Path) -> None:
    pairs = [{"problem": f"Generated {i}", "benchmark": "math500", "benchmark_problem": f"Benchmark {i}",
              "similarity": 0.9 - i / 100} for i in range(10)]
    commit_stage(tmp_path, "generate", config={}, inputs=[], outputs=[],
              body=lambda: StageResult("generate", info={"closest_benchmark_pairs": pairs}))

    section = report.contamination_section(report.Page(runner.context(report.STAGE, PipelineConfig(), tmp_path)))

    assert section.body.count("<tr>") == 11  # the header and ten pairs, nearest first
    assert section.body.index("Generated 0") < section.body.index("Generated 9")
    assert "<td>0.9</td><td>Generated 0</td><td>math500</td><td>Benchmark 0</td>" in section.body.replace(
        "0.900", "0.9")


def test_the_audit_and_the_tokens_of_each_step_are_reported(tmp_path: Path) -> None:
    from sws import tokens
    from sws.config import Price
    from sws.engines import Completion
    from sws.stages import audit

    def model_step(step: str, role: str, completions: list[Completion], info: dict) -> None:
        def body() -> StageResult:
            tokens.record(role, [completions])
            return StageResult(step, info=info)

        commit_stage(tmp_path, step, config={}, inputs=[], outputs=[], body=body)

    model_step("label", "labeler", [Completion("a", 100, prompt_tokens=1000), Completion("b", 100)], {})
    model_step("audit", "auditor", [Completion("c", 50, prompt_tokens=500)], {
        "audited": 40, "judged": 40, "disagrees": 4, "wrong_label_rate": audit.wrong_label_rate(4, 40)})
    write_table(tmp_path, "filtered", pl.DataFrame({
        "syn_id": ["x1", "x2"], "category": ["remainders"] * 2, "problem": ["a", "b"], "answer": ["1", "2"],
        "n": [8, 8], "n_correct": [2, 6], "accuracy": [0.25, 0.75], "round": [0, 0]}))
    cfg = PipelineConfig()
    cfg.pricing = {"labeler": Price(input=2.0, output=10.0)}
    runner.run(report.STAGE, cfg, tmp_path)
    found = sections(RunDir(tmp_path).report.read_text())
    assert "an estimated 10.0% of the labels are wrong (95% interval 4.0% to 23.1%)" in found["Label audit"]
    used = found["Tokens and cost"]
    assert "<td>label</td><td>labeler</td><td>1000</td><td>200</td><td>2</td><td>0.004</td>" in used
    assert "<td>audit</td><td>auditor</td><td>500</td><td>50</td><td>1</td><td>–</td>" in used
    assert "<td>total</td><td></td><td>1500</td><td>250</td><td>3</td><td>0.004</td>" in used
    assert "875 tokens, $0.002 per filtered problem (2 kept)" in used


def test_rounds_section_shows_the_headline_across_rounds_and_the_ledger_flow(tmp_path: Path) -> None:
    runner.run(report.STAGE, PipelineConfig(), tmp_path)
    assert "No ledger here" in sections(RunDir(tmp_path).report.read_text())["Rounds: weaknesses across rounds"]
    write_table(tmp_path, "ledger", pl.DataFrame({
        "round": [1, 1, 2, 2, 2], "problem_id": ["a", "b", "a", "b", "c"],
        "weak": [True, True, False, True, True], "max_acc": [0.0] * 5, "slope": [0.0] * 5,
        "accuracy": [0.5, 0.0, 1.0, 0.0, None], "status": ["new", "new", "resolved", "persisting", "new"]}))
    write_table(tmp_path, "rounds_summary", pl.DataFrame({
        "round": [1, 2], "n_weak": [2, 2], "n_kept": [4, 3], "resolved_share": [None, 0.5],
        "weak_solved_initial": [0.1, 0.2], "weak_solved_baseline": [0.2, 0.3], "weak_solved_augmented": [0.3, 0.4]}))
    second = RunDir(tmp_path).round(2).root
    write_table(second, "eval/weakness", pl.DataFrame({
        "checkpoint": ["initial", "augmented"], "category": ["overall"] * 2, "n_weak": [2, 2], "n_solved": [0, 1],
        "solved": [0.0, 0.5], "avg_k": [0.1, 0.4]}))
    two_rounds = PipelineConfig.model_validate({"rounds": {"n": 2}})
    runner.run(report.STAGE, two_rounds, tmp_path)  # the ledger is an input: the report is written again
    body = sections(RunDir(tmp_path).report.read_text())["Rounds: weaknesses across rounds"]
    assert len(re.findall(r'src="data:image/png;base64,', body)) == 2
    assert "<td>new</td><td>resolved</td><td>1</td>" in body  # a round-1 weak problem resolved in round 2
    assert "<td>(not weak yet)</td><td>new</td><td>1</td>" in body
    round_two = body.split("<h3>Round 2")[1]
    assert "<th>category</th><th>initial</th><th>synthetic</th>" in round_two
    assert "<td>overall</td><td>0.000</td><td>0.500</td>" in round_two
    assert "Ledger (5 rows" in body
    runner.run(report.STAGE, two_rounds, second)
    own = sections(RunDir(second).report.read_text())["Rounds: weaknesses across rounds"]
    assert f"This is round 2 of {tmp_path}" in own and str(RunDir(tmp_path).report) in own


def test_without_the_selected_arm_its_section_says_how_to_turn_it_on(page: str) -> None:
    body = sections(page)["Synthesis against selection: seed only, synthetic and selected on the same steps"]
    assert "set select.arm: true" in body


def test_the_three_arms_section_compares_seed_only_synthetic_and_selected(tmp_path: Path) -> None:
    seed = pl.DataFrame({"problem_id": [f"s{i}" for i in range(4)], "problem": [f"Compute {i}+1." for i in range(4)],
                         "answer": [str(i + 1) for i in range(4)], "category": ["addition"] * 4, "source": ["seed"] * 4})
    write_table(tmp_path, "problems", seed)

    def with_added(ids: list[str], category: str) -> pl.DataFrame:
        added = pl.DataFrame({"problem_id": ids, "problem": ids, "answer": ["0"] * len(ids),
                              "category": [category] * len(ids), "source": ["new"] * len(ids)})
        return pl.concat([seed, added])

    write_table(tmp_path, "augmented", with_added(["x1", "x2"], "remainders"))
    write_table(tmp_path, "selected_mix", with_added(["p1", "p2"], "remainders"))
    for kind in ("initial", "baseline", "augmented", "selected"):
        write_table(tmp_path, f"train/{kind}/curve", pl.DataFrame({
            "step": [1, 2, 3], "reward": [0.5] * 3, "reward_std": [0.1] * 3, "loss": [0.0] * 3}))
    per_problem = per_problem_eval((("initial", 0), ("baseline", 1), ("augmented", 2), ("selected", 3)))
    write_table(tmp_path, "eval/problems", per_problem)
    write_table(tmp_path, "eval/benchmarks", eval_stage.benchmark_table(per_problem))
    write_table(tmp_path, "eval/weakness", eval_stage.weakness_table(per_problem))
    cfg = PipelineConfig.model_validate({"select": {"arm": True}, "mix": {"sources": ["synthetic"]}})
    runner.run(report.STAGE, cfg, tmp_path)

    body = sections(RunDir(tmp_path).report.read_text())[
        "Synthesis against selection: seed only, synthetic and selected on the same steps"]
    assert "as many pool problems as the band filter kept" in body
    assert "GRPO steps: seed only 3, synthetic 3, selected 3" in body
    tables = re.findall(r"<table>(.*?)</table>", body, re.DOTALL)
    added, weak, like = tables[:3]
    assert re.findall(r"<th>(.*?)</th>", added) == ["category", "seed only", "synthetic", "selected"]
    assert re.findall(r"<td>(.*?)</td>", re.search(r"<tr><td>overall</td>.*?</tr>", added).group(0)) == [
        "overall", "0", "2", "2"]
    assert re.findall(r"<th>(.*?)</th>", weak) == [
        "category", "seed only", "synthetic", "selected", "synthetic − seed only (points)",
        "selected − seed only (points)", "synthetic − selected (points)", "n_weak"]
    # of 4 weak problems: baseline 1, augmented 2, selected 3
    assert re.findall(r"<td>(.*?)</td>", re.search(r"<tr><td>overall</td>.*?</tr>", weak).group(0)) == [
        "overall", "0.250", "0.500", "0.750", "+25.0", "+50.0", "-25.0", "4"]
    assert re.findall(r"<td>(.*?)</td>", re.search(r"<tr><td>overall</td>.*?</tr>", like).group(0))[1:4] == [
        "0.000", "1.000", "0.000"]
    assert "Confound" not in body  # the online filter is off, or on every arm alike
    asymmetric = PipelineConfig.model_validate({**cfg.model_dump(mode="json"), "train": {
        "online_filter": [0.125, 0.875], "online_filter_arms": "augmented"}})
    runner.run(report.STAGE, asymmetric, tmp_path)
    body = sections(RunDir(tmp_path).report.read_text())[
        "Synthesis against selection: seed only, synthetic and selected on the same steps"]
    assert "Confound: the online filter (train.online_filter [0.125, 0.875])" in body


def test_a_category_with_fewer_than_ten_weak_problems_is_not_drawn_as_a_share() -> None:
    wide = pl.DataFrame({"category": ["addition", "remainders"], "baseline": [1.0, 0.4], "augmented": [0.0, 0.5]})
    counts = pl.DataFrame({"category": ["addition", "remainders"], "n_weak": [1, 12]})
    figure = report.mitigation_figure(wide, counts)
    axes = figure.axes[0]
    assert [label.get_text() for label in axes.get_xticklabels()] == ["remainders (n=12)"]
    assert sorted(round(bar.get_height(), 2) for bar in axes.patches) == [0.4, 0.5]
    assert axes.get_xlabel() and axes.get_ylabel()
    assert report.mitigation_figure(wide, counts.with_columns(pl.lit(3).alias("n_weak"))) is None


def test_the_mitigation_section_names_the_categories_left_out_of_its_plot(page: str) -> None:
    body = sections(page)["Weakness mitigation: share of the previously weak problems each policy solves"]
    assert "fewer than 10 weak problems are left out of it and shown with their n in the table (addition, " \
           "remainders, overall)" in body


def test_the_funnel_calls_the_difficulty_filter_band_and_shows_its_rejections(page: str) -> None:
    body = sections(page)["Synthesis funnel"]
    rows = [re.findall(r"<td>(.*?)</td>", row) for row in re.findall(r"<tr>(.*?)</tr>", body)]
    band = next(cells for cells in rows if cells and cells[0] == "band")
    assert band[:4] == ["band", "4", "2", "2"] and set(band[4].split(", ")) == {"too hard 1", "too easy 1"}
    assert "band: the difficulty filter" in body


class TablesOnly:
    """What the report's arm helpers read of a page: its tables."""

    def __init__(self, tables: dict[str, pl.DataFrame]) -> None:
        self.tables = tables

    def table(self, name: str) -> pl.DataFrame | None:
        return self.tables.get(name)


def weak_like_benchmarks(avg_k: dict[str, float]) -> pl.DataFrame:
    return pl.DataFrame({"checkpoint": list(avg_k), "eval_set": [eval_stage.WEAK_LIKE_SET] * len(avg_k),
                         "category": [eval_stage.OVERALL] * len(avg_k), "n": [100] * len(avg_k),
                         "pass1": list(avg_k.values()), "avg_k": list(avg_k.values())})


def test_the_efficiency_line_says_what_share_of_the_family_oracles_gain_synthesis_recovers() -> None:
    page = TablesOnly({"eval/benchmarks": weak_like_benchmarks(
        {"baseline": 0.10, "augmented": 0.12, "oracle_family": 0.18})})
    line = report.efficiency_line(page)
    assert "synthetic − seed only +2.0 points against the family oracle&#x27;s +8.0" in line
    assert "recovers 25 % of it" in line
    no_gain = TablesOnly({"eval/benchmarks": weak_like_benchmarks(
        {"baseline": 0.10, "augmented": 0.12, "oracle_family": 0.09})})
    assert "undefined (no gain to recover)" in report.efficiency_line(no_gain)
    assert report.efficiency_line(TablesOnly({"eval/benchmarks": weak_like_benchmarks(
        {"baseline": 0.10, "augmented": 0.12})})) == ""


def test_the_share_of_each_arms_added_problems_in_the_weak_families() -> None:
    from types import SimpleNamespace

    from sws.world import get_world

    seed = pl.DataFrame({"problem_id": ["p1", "p2"], "problem": ["Compute 27+15.", "Compute 7*8."],
                         "answer": ["42", "56"], "category": ["addition", "multiplication"], "source": ["arith"] * 2})
    weakness = pl.DataFrame({"problem_id": ["p1", "p2"], "weak": [True, False]})
    added = pl.DataFrame({"problem_id": ["s1", "s2", "s3", "s4"],
                          "problem": ["Compute 38+26.", "Compute 19+47.", "Compute 6*9.", "Compute 85-3."],
                          "answer": ["64", "66", "54", "82"], "category": ["addition"] * 2 + ["multiplication",
                                                                                             "subtraction"],
                          "source": ["syn/x"] * 4})
    page = TablesOnly({"problems": seed, "weakness": weakness, "augmented": pl.concat([seed, added])})
    page.context = SimpleNamespace(world=get_world("arith"))
    shares = report.weak_family_shares(page, {"augmented": "synthetic"})
    assert shares.to_dicts() == [{"arm": "synthetic", "added": 4, "in a weak family": 0.5}]
