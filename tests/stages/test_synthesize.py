from __future__ import annotations

import random
import re
from pathlib import Path

import polars as pl
import pytest
import yaml
from _openai_server import MODEL, serving
from _synthesis_run import noisy_pipeline_file, write_identified_run
from typer.testing import CliRunner

from sws.cli import app
from sws.config import EngineConfig, PipelineConfig, Price
from sws.errors import UserError
from sws.funnel import read_budget_spending, read_funnel, token_usage
from sws.manifests import read_manifest
from sws.stages import synthesize
from sws.tables import read_parquet, read_table, rejected_path, table_path
from sws.worlds.arith import solve
from sws.worlds.arith.world import ORACLE

OUTPUTS = ("concepts", "concept_sets", "synthetic", "rated", "labeled")
FILTERS = ("concepts", "synthetic", "rated", "labeled")


def test_cli_runs_every_step_and_prints_the_funnel(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_identified_run(run)
    result = CliRunner().invoke(app, ["synthesize", "--run", str(run), "--config", str(noisy_pipeline_file(tmp_path))])
    assert result.exit_code == 0, result.output
    assert "synthesis funnel" in result.output
    labeled = read_table(run, "labeled")
    assert labeled.height > 0
    for problem, answer in zip(labeled["problem"], labeled["answer"], strict=True):
        assert solve(problem).kind == "ok"
        assert answer is not None
    funnel = read_funnel(run, list(synthesize.declared_steps()))
    assert [row.step for row in funnel] == synthesize.steps_on(PipelineConfig()) == [
        step for step in synthesize.declared_steps() if step != "audit"]
    for previous, row in zip(funnel, funnel[1:], strict=False):
        if row.step != "combine":
            assert row.rows_in == previous.kept
    for row in funnel:
        assert row.rows_in == row.kept + sum(row.rejected.values())
    for name in FILTERS:
        rejected = read_parquet(rejected_path(run, name))
        assert rejected["reject_reason"].null_count() == 0
    synthetic_rejected = set(read_parquet(rejected_path(run, "synthetic"))["reject_reason"])
    assert {"multi_part", "proof", "true_false"} <= synthetic_rejected
    assert read_manifest(run, "label")["info"]["funnel"]["kept"] == labeled.height
    assert "how each category's budget was spent" in result.output
    spending = read_budget_spending(run, "combine", "generate")
    sets_per_category = dict(read_table(run, "concept_sets")["category"].value_counts().iter_rows())
    kept_per_category = dict(read_table(run, "synthetic")["category"].value_counts().iter_rows())
    assert spending.height == len(sets_per_category) > 0
    for row in spending.iter_rows(named=True):
        assert row["budgeted sets"] == row["distinct sets"] + row["level-filled"] + row["instance-filled"]
        assert row["generated"] == sets_per_category[row["category"]] == row["budgeted sets"]
        assert row["kept after dedup"] == kept_per_category.get(row["category"], 0)
        assert row["near-duplicates"] <= row["generated"] - row["kept after dedup"]


def test_a_rerun_that_skips_every_step_prints_the_same_tables(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_identified_run(run)
    argv = ["synthesize", "--run", str(run), "--config", str(noisy_pipeline_file(tmp_path))]
    first, again = (CliRunner().invoke(app, argv) for _ in range(2))
    assert first.exit_code == again.exit_code == 0, first.output + again.output
    assert again.output.count("up to date, skipped") == len(synthesize.steps_on(PipelineConfig()))

    def tables(output: str) -> str:
        return output[output.index("synthesis funnel"):]

    assert "how each category's budget was spent" in first.output and "tokens per step and role" in first.output
    assert tables(again.output) == tables(first.output)


def test_rerun_skips_every_current_step(tmp_path: Path) -> None:
    write_identified_run(tmp_path)
    config = PipelineConfig()
    config.synthesize.budget = 10
    config.synthesize.set_size = 3
    first = synthesize.run(config, tmp_path)
    again = synthesize.run(config, tmp_path)
    assert again.info["funnel"] == first.info["funnel"]
    assert all(read_manifest(tmp_path, step) is not None for step in synthesize.steps_on(config))
    # a changed setting reruns its step and the steps after it (their inputs changed)
    config.roles.judges = [EngineConfig(**ORACLE, options={"judge_error": 1.0})]
    changed = synthesize.run(config, tmp_path, steps=["rate", "label"])
    assert changed.info["funnel"][0]["kept"] < first.info["funnel"][3]["kept"]


def test_steps_run_alone_and_in_pipeline_order(tmp_path: Path) -> None:
    write_identified_run(tmp_path)
    config = PipelineConfig()
    config.synthesize.budget = 10
    result = synthesize.run(config, tmp_path, steps=["combine", "extract"])
    assert [row["step"] for row in result.info["funnel"]] == ["extract", "combine"]
    assert table_path(tmp_path, "concept_sets").exists() and not table_path(tmp_path, "synthetic").exists()


def test_no_weak_problems_ends_with_a_message_and_empty_outputs(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_identified_run(run, weak_categories=())
    result = CliRunner().invoke(app, ["synthesize", "--run", str(run)])
    assert result.exit_code == 0, result.output
    assert "no weak problems" in result.output
    for name in OUTPUTS:
        assert read_table(run, name).height == 0


def test_missing_upstream_artifact_names_the_command(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["synthesize", "--run", str(tmp_path)])
    assert result.exit_code == 2
    assert "error:" in result.output and "sws identify" in result.output
    assert "Traceback" not in result.output


def test_unknown_step_is_rejected_before_anything_is_written(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["synthesize", "--run", str(tmp_path), "--sub-steps", "extract,dedupe"])
    assert result.exit_code == 2
    assert "unknown sub-step 'dedupe'" in result.output
    assert not any(tmp_path.iterdir())


def test_parse_steps() -> None:
    assert synthesize.parse_steps("label, extract") == ["extract", "label"]
    assert synthesize.parse_steps(None) == list(synthesize.declared_steps())
    with pytest.raises(UserError):
        synthesize.parse_steps(" , ")


HF_CHAT_TEMPLATE = "{% for message in messages %}{{ message['content'] }}{% endfor %}\n"


@pytest.mark.slow
def test_every_step_runs_on_the_hf_engine_with_the_tiny_policy(tmp_path: Path) -> None:
    """The tiny policy cannot play a teacher, so nearly everything it writes is rejected; every step must still
    run on it, and every rejection must carry a reason."""
    from sws.worlds.arith.policy import build_policy

    run = tmp_path / "run"
    write_identified_run(run, n_problems=30)
    policy = build_policy(tmp_path / "policy", seed=0)
    hf = EngineConfig(engine="hf", model=str(policy), max_tokens=24, temperature=1.0,
                      options={"chat_template": HF_CHAT_TEMPLATE})
    config = PipelineConfig()
    config.synthesize.budget = 6
    config.synthesize.set_size = 3
    config.synthesize.label_samples = 2
    config.synthesize.weak_to_strong = True
    config.synthesize.student_samples = 2
    config.roles.policy = hf
    # first every role on hf: the chain must hold even when a step rejects everything
    config.roles.extractor = config.roles.generator = config.roles.labeler = hf
    config.roles.judges = [hf]
    synthesize.run(config, run)
    # then each role on hf in turn, with oracle upstream so that it has real input; "policy" is the
    # weak-to-strong student, asked only about problems the (oracle) teacher labeled consistently
    oracle = EngineConfig(**ORACLE)
    funnels = {}
    for role in ("extractor", "generator", "judges", "labeler", "policy"):
        for other in ("extractor", "generator", "labeler"):
            setattr(config.roles, other, hf if other == role else oracle)
        config.roles.judges = [hf if role == "judges" else oracle]
        config.synthesize.weak_to_strong = role == "policy"
        funnels[role] = {row["step"]: row for row in synthesize.run(config, run).info["funnel"]}
    assert funnels["extractor"]["extract"]["kept"] < funnels["extractor"]["extract"]["in"]
    assert funnels["generator"]["generate"]["in"] > 0 and funnels["generator"]["generate"]["kept"] == 0
    assert funnels["judges"]["rate"]["in"] > 0
    assert funnels["labeler"]["label"]["in"] > 0
    assert funnels["policy"]["label"]["rejected"].get("student_disagrees", 0) > 0
    for name in FILTERS:
        assert read_parquet(rejected_path(run, name))["reject_reason"].null_count() == 0
    for row in read_funnel(run, list(synthesize.declared_steps())):
        assert row.rows_in == row.kept + sum(row.rejected.values())


def failing_models_pipeline(tmp_path: Path) -> Path:
    """Every failure of small real models at once, played by the oracle."""
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump({
        "roles": {
            "generator": {"engine": "oracle", "model": "arith-oracle", "options": {"run_on": 0.6, "cut_off": 0.2}},
            "judges": [{"engine": "oracle", "model": "arith-oracle", "options": {"rubber_stamp": 0.6}}],
            "labeler": {"engine": "oracle", "model": "arith-oracle",
                        "options": {"ignores_n": True, "cut_off": 0.2, "labeler_error": 0.1}},
        },
        "synthesize": {"budget": 40, "set_size": 3, "label_samples": 4},
    }))
    return path


def test_the_failures_of_real_models_are_caught_end_to_end(tmp_path: Path) -> None:
    from sws.problem_filters import shows_solution

    run = tmp_path / "run"
    write_identified_run(run)
    result = CliRunner().invoke(app, ["synthesize", "--run", str(run), "--config", str(failing_models_pipeline(tmp_path))])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())
    assert said.count("sending n single-choice requests") == 1
    assert "hit max_tokens" in said and "roles.generator.max_tokens" in said
    funnel = {row.step: row for row in read_funnel(run, list(synthesize.declared_steps()))}
    assert funnel["generate"].rejected.get("truncated", 0) > 0 and funnel["label"].truncated > 0
    rated = read_table(run, "rated")
    assert all(not shows_solution(problem) and "\\boxed" not in problem for problem in rated["problem"])
    # A kept problem has perfect verdicts, and a verdict counts only below an analysis: rubber stamps were re-asked.
    assert all(any(analyses) for reasoning in rated["reasoning"] for analyses in yaml.safe_load(reasoning).values())
    labeled = read_table(run, "labeled")
    assert labeled.height > 0
    assert all(len(answers) == 4 for answers in labeled["answers"])
    right = sum(answer == solve(problem).answer for problem, answer in zip(labeled["problem"], labeled["answer"],
                                                                             strict=True))
    assert right >= 0.9 * labeled.height


def test_roles_with_the_same_engine_settings_share_one_engine_per_run(tmp_path: Path, monkeypatch) -> None:
    from sws.worlds.arith import oracle

    builds: list[str] = []
    real_init = oracle.OracleEngine.__init__

    def counting_init(self, cfg) -> None:
        builds.append(cfg.model)
        real_init(self, cfg)

    monkeypatch.setattr(oracle.OracleEngine, "__init__", counting_init)
    write_identified_run(tmp_path)
    config = PipelineConfig()
    config.synthesize.budget = 10
    config.synthesize.set_size = 3
    synthesize.run(config, tmp_path)
    assert builds == ["arith-oracle"]  # extractor, generator, judge and labeler: one engine
    synthesize.run(config, tmp_path, force=True, steps=["rate"])
    assert builds == ["arith-oracle"]  # every answer came from the cache: nothing was built


def play_teacher(prompt: str, body: dict) -> str:
    """Every teacher role from the rendered prompt alone (the arith teacher's rules), with the request's seed as
    the only source of randomness."""
    from sws.worlds.arith import teacher

    rng = random.Random(body.get("seed", 0))
    if prompt.startswith("A student keeps getting"):
        problem = prompt.split("Problem:\n", 1)[1].split("\n\nList the", 1)[0]
        return teacher.extract_text(problem, int(re.search(r"List the (\d+)", prompt).group(1)), rng)
    if prompt.startswith("Write one new math problem"):
        category, level = re.search(r'category "([^"]+)" at (\w+) difficulty', prompt).groups()
        concepts = re.findall(r"^- (.+)$", prompt.split("The problem must be", 1)[0], re.M)
        return teacher.generate_text(category, concepts, level, {}, rng)
    if prompt.startswith("You are reviewing"):
        return teacher.rate_text(prompt.split("Problem:\n", 1)[1].split("\n\nFirst write", 1)[0], 0.0, rng)
    return f"(sample drawn with seed {body.get('seed')})\n" + teacher.label_text(labeled_problem(prompt), 0.3, rng)


def labeled_problem(prompt: str) -> str | None:
    """The problem a labeler prompt asks about; None for the other roles' prompts."""
    parts = prompt.split("\\boxed{}.\n\n", 1)
    return parts[1].strip() if len(parts) == 2 else None


def test_synthesize_against_a_server_that_ignores_n_gets_distinct_labeler_samples(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")
    run = tmp_path / "run"
    write_identified_run(run, n_problems=40)
    with serving() as server:
        server.ignores_n, server.writer = True, play_teacher
        teacher = {"engine": "openai", "model": MODEL, "options": {"base_url": server.base_url, "max_concurrency": 4}}
        pipeline = tmp_path / "pipeline.yaml"
        pipeline.write_text(yaml.safe_dump({
            "roles": {"extractor": teacher, "generator": teacher, "judges": [teacher], "labeler": teacher},
            "synthesize": {"budget": 12, "set_size": 3, "label_samples": 4},
        }))
        result = CliRunner().invoke(app, ["synthesize", "--run", str(run), "--config", str(pipeline)])
        label_requests = [(body.get("n", 1), body.get("seed"), problem) for _, body in server.posts
                          if (problem := labeled_problem(body["messages"][-1]["content"])) is not None]
    assert result.exit_code == 0, result.output
    labeled = read_table(run, "labeled")
    assert labeled.height > 0 and all(len(answers) == 4 for answers in labeled["answers"])
    probes = [request for request in label_requests if request[0] == 4]
    assert len(probes) == 1  # the first labeler request found out; every later one asked for one choice
    seeds: dict[str, set[int]] = {}
    for n, seed, problem in label_requests:
        if n == 1:
            seeds.setdefault(problem, set()).add(seed)
    assert seeds and all(len(distinct) == 4 for distinct in seeds.values())
    # distinct samples: with a wrong-answer rate of 0.3, some labels are not unanimous
    assert labeled["consistency"].min() < 1.0


def test_tokens_from_the_servers_usage_are_summed_per_step_and_role(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")
    run = tmp_path / "run"
    write_identified_run(run, n_problems=40)
    with serving() as server:  # usage: 3 prompt tokens a call, 10 completion tokens a choice
        server.writer = play_teacher
        teacher = {"engine": "openai", "model": MODEL, "options": {"base_url": server.base_url, "n_mode": "native"}}
        pipeline = tmp_path / "pipeline.yaml"
        pipeline.write_text(yaml.safe_dump({
            "roles": {"extractor": teacher, "generator": teacher, "judges": [teacher], "labeler": teacher,
                      "auditor": teacher},
            "synthesize": {"budget": 12, "set_size": 3, "label_samples": 4}, "audit": {"samples": 2},
            "pricing": {"labeler": {"input": 1.0, "output": 2.0}},
        }))
        result = CliRunner().invoke(app, ["synthesize", "--run", str(run), "--config", str(pipeline)])
        calls = len(server.posts)
    assert result.exit_code == 0, result.output
    assert "tokens per step and role" in result.output
    steps = synthesize.steps_on(PipelineConfig.model_validate(yaml.safe_load(pipeline.read_text())))
    used = {step: read_manifest(run, step).get("tokens", {}) for step in steps}
    assert set(used["label"]) == {"labeler"} and set(used["audit"]) == {"auditor"} and used["combine"] == {}
    funnel = {row.step: row for row in read_funnel(run, steps)}
    for step in ("extract", "generate", "label", "audit"):
        [counts] = used[step].values()
        assert counts["completions"] == funnel[step].completions > 0
        assert counts["completion"] == 10 * counts["completions"]
        assert counts["prompt"] == 3 * funnel[step].rows_in  # one call per problem, billed once for its n choices
    assert sum(counts["prompt"] for step in used.values() for counts in step.values()) == 3 * calls
    label = used["label"]["labeler"]
    table = token_usage(run, steps, {"labeler": Price(input=1.0, output=2.0)})
    assert table.filter(pl.col("step") == "label")["cost ($)"].to_list() == [
        pytest.approx(label["prompt"] * 1e-6 + label["completion"] * 2e-6)]
    # only the labeler is priced, so the total's cost is the labeler's
    assert table["step"][-1] == "total" and table["cost ($)"][-1] == pytest.approx(
        label["prompt"] * 1e-6 + label["completion"] * 2e-6)
    assert "tokens, $" in result.output and "per labeled problem" in result.output


def oracle_requests(monkeypatch) -> list[str]:
    """The key of every request that reaches the oracle engine."""
    from sws.engines.cache import request_key
    from sws.worlds.arith.oracle import OracleEngine

    seen: list[str] = []
    real = OracleEngine.generate

    def generate(self, requests):
        seen.extend(request_key({"options": self.rates}, request) for request in requests)
        return real(self, requests)

    monkeypatch.setattr(OracleEngine, "generate", generate)
    return seen


def synthesis_tables(run: Path) -> dict[str, list]:
    return {f"{name}{part}": read_parquet(run / f"{name}{part}.parquet").rows()
            for name in OUTPUTS for part in ("", ".rejected") if (run / f"{name}{part}.parquet").exists()}


def test_a_run_stopped_at_max_tokens_continues_with_a_higher_cap_asking_nothing_twice(tmp_path: Path,
                                                                                      monkeypatch) -> None:
    asked = oracle_requests(monkeypatch)
    pipeline = noisy_pipeline_file(tmp_path, budget=40, shard_size=4)
    straight = tmp_path / "straight"
    write_identified_run(straight, n_problems=60)
    assert CliRunner().invoke(app, ["synthesize", "--run", str(straight), "--config", str(pipeline)]).exit_code == 0
    uncapped, total = list(asked), sum(
        counts["prompt"] + counts["completion"]
        for step in synthesize.steps_on(PipelineConfig()) for counts in read_manifest(straight, step).get("tokens", {}).values())
    asked.clear()

    run = tmp_path / "run"
    write_identified_run(run, n_problems=60)
    stops = []
    for cap in (total // 3, total // 3, 2 * total // 3):
        result = CliRunner().invoke(app, ["synthesize", "--run", str(run), "--config", str(pipeline),
                                          "--token-cap", str(cap)])
        assert result.exit_code == 3, result.output
        [line] = [line for line in result.output.splitlines() if line.startswith("stopped:")]
        assert f"reached synthesize.max_tokens = {cap:,} after" in line and "--token-cap" in line
        spent = int(line.split(" after ")[1].split(" tokens")[0].replace(",", ""))
        assert cap <= spent < total
        partial = [step for step in synthesize.steps_on(PipelineConfig())
                   if (read_manifest(run, step, partial=True) or {}).get("partial")]
        assert len(partial) == 1 and read_manifest(run, partial[0]) is None  # a partial step counts as not done
        assert not (run / "labeled.parquet").exists()
        stops.append((partial[0], spent, len(asked)))
    assert stops[1] == stops[0]  # the same cap again: stopped at the same shard, no new request
    assert stops[2][1] > stops[0][1]
    result = CliRunner().invoke(app, ["synthesize", "--run", str(run), "--config", str(pipeline)])
    assert result.exit_code == 0, result.output
    assert len(asked) == len(set(asked))  # no request reached the engine twice
    assert sorted(asked) == sorted(uncapped)
    assert synthesis_tables(run) == synthesis_tables(straight)
    assert all(read_manifest(run, step) is not None for step in synthesize.steps_on(PipelineConfig()))


def test_max_cost_stops_on_the_priced_roles_and_needs_a_price(tmp_path: Path) -> None:
    run = tmp_path / "run"
    write_identified_run(run, n_problems=60)
    pipeline = noisy_pipeline_file(tmp_path, budget=20, shard_size=4)
    result = CliRunner().invoke(app, ["synthesize", "--run", str(run), "--config", str(pipeline), "--cost-cap", "1"])
    assert result.exit_code == 2 and "'pricing' prices none of the synthesis roles" in result.output
    assert not (run / "manifests").exists()
    priced = yaml.safe_load(pipeline.read_text()) | {"pricing": {"generator": {"input": 1000.0, "output": 1000.0}}}
    pipeline.write_text(yaml.safe_dump(priced))
    result = CliRunner().invoke(app, ["synthesize", "--run", str(run), "--config", str(pipeline), "--cost-cap", "1"])
    assert result.exit_code == 3, result.output
    assert "reached synthesize.max_cost = $1 after" in result.output and "--cost-cap" in result.output
    assert read_manifest(run, "generate", partial=True)["partial"] and read_manifest(run, "extract") is not None
    spent = read_manifest(run, "generate", partial=True)["tokens"]["generator"]
    assert (spent["prompt"] + spent["completion"]) * 1000 / 1e6 >= 1


def test_an_api_key_the_server_echoes_is_stored_and_printed_nowhere(tmp_path: Path, monkeypatch) -> None:
    key = "sk-test-0123456789abcdef"
    monkeypatch.setenv("OPENAI_API_KEY", key)
    run = tmp_path / "run"
    write_identified_run(run, n_problems=40)
    with serving() as server:
        server.writer, server.echo_authorization = play_teacher, True
        teacher = {"engine": "openai", "model": MODEL, "options": {"base_url": server.base_url}}
        pipeline = tmp_path / "pipeline.yaml"
        pipeline.write_text(yaml.safe_dump({
            "roles": {"extractor": teacher, "generator": teacher, "judges": [teacher], "labeler": teacher},
            "synthesize": {"budget": 12, "set_size": 3, "label_samples": 2},
        }))
        result = CliRunner().invoke(app, ["synthesize", "--run", str(run), "--config", str(pipeline)])
    assert result.exit_code == 0, result.output
    stored = {path: str(read_parquet(path).to_dicts()) for path in run.rglob("*.parquet")}
    assert any("[redacted]" in text for text in stored.values())  # the echo was there to find
    assert key not in result.output
    for path in run.rglob("*"):
        if path.is_file():
            assert key.encode() not in path.read_bytes(), path
    assert not [path for path, text in stored.items() if key in text]  # parquet is compressed: read it too
