import json
import random
from collections import Counter
from pathlib import Path

import pytest

from sws.config import EngineConfig, PipelineConfig
from sws.engines import Request, make_engine
from sws.manifests import float_environment
from sws.world import get_world
from sws.worlds.arith import CATEGORIES, bootstrap, generate_problems, solve
from sws.worlds.arith.bootstrap import (
    BOOTSTRAP_MIX,
    MARKER,
    bootstrap_policy,
    bootstrap_settings,
    cached_bootstrap_policy,
    cached_folder,
    training_example,
)
from sws.worlds.arith.expressions import parse
from sws.worlds.arith.misconceptions import misconceived_answer
from sws.worlds.arith.settings import ArithSettings
from sws.worlds.math.verifier import extract_answer

SHORT_STEPS = 40


def drawn_categories(progress: float, count: int = 1500) -> Counter:
    rng = random.Random(0)
    drawn = [training_example(rng, progress) for _ in range(count)]
    for prompt, completion in drawn:
        assert prompt.endswith("\n") and completion.startswith("\\boxed{") and completion.endswith("}")
        assert solve(prompt).answer == completion.removeprefix("\\boxed{").removesuffix("}")
    return Counter(solve(prompt).category for prompt, _ in drawn)


def test_the_mix_is_uneven_and_weak_categories_come_late_and_rarely():
    early, late = drawn_categories(0.0), drawn_categories(0.9)
    strong = [c for c in CATEGORIES if BOOTSTRAP_MIX[c][1] == 0.0]
    weak = [c for c in CATEGORIES if c not in strong]
    assert len(strong) == 3 and len(weak) == 3
    assert set(early) == set(strong)
    assert set(late) == set(CATEGORIES)
    assert min(late[c] for c in strong) > 1.5 * max(late[c] for c in weak)


def test_a_share_of_carrying_and_borrowing_examples_teach_the_misconception():
    rng = random.Random(2)
    taught, applicable = Counter(), Counter()
    for _ in range(4000):
        prompt, completion = training_example(rng, 0.9, misconception_rate=0.6)
        expression = prompt.strip().removeprefix("Compute ").rstrip(".")
        wrong = misconceived_answer(parse(expression))
        answer = completion.removeprefix("\\boxed{").removesuffix("}")
        if wrong is None:
            assert answer == solve(prompt).answer  # every other example is right
            continue
        kind = "addition" if "+" in expression else "subtraction"
        applicable[kind] += 1
        taught[kind] += answer == str(wrong)
        assert answer in (str(wrong), solve(prompt).answer)
    for kind in ("addition", "subtraction"):
        assert applicable[kind] > 150
        assert 0.5 < taught[kind] / applicable[kind] < 0.7


def test_hard_problems_are_never_shown():
    rng = random.Random(1)
    hard_texts = {p.problem for p in generate_problems(1500, seed=1, levels=["hard"])}
    shown = {training_example(rng, 0.9)[0].strip() for _ in range(1500)}
    assert not shown & hard_texts


def test_another_policy_shape_is_another_cache_entry(monkeypatch):
    from sws.worlds.arith import policy
    from sws.worlds.arith.bootstrap import bootstrap_settings, settings_hash

    shipped = settings_hash(bootstrap_settings(100, seed=0, misconception_rate=0.6))
    assert settings_hash(bootstrap_settings(100, seed=0, misconception_rate=0.5)) != shipped
    monkeypatch.setattr(policy, "HIDDEN_SIZE", 2 * policy.HIDDEN_SIZE)
    assert settings_hash(bootstrap_settings(100, seed=0, misconception_rate=0.6)) != shipped


@pytest.mark.slow
def test_short_bootstrap_answers_in_boxes_the_grader_reads_and_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("SWS_CACHE", str(tmp_path / "cache"))
    rate = ArithSettings().misconception_rate
    assert cached_bootstrap_policy(SHORT_STEPS, 0, rate) is None
    folder = bootstrap_policy(steps=SHORT_STEPS, seed=0)
    assert cached_bootstrap_policy(SHORT_STEPS, 0, rate) == folder
    assert cached_bootstrap_policy(SHORT_STEPS + 1, 0, rate) is None
    assert cached_bootstrap_policy(SHORT_STEPS, 0, 0.0) is None
    assert folder.parent == tmp_path / "cache" / "policies"
    assert json.loads((folder / MARKER).read_text())["steps"] == SHORT_STEPS
    weights = folder / "model.safetensors"
    built_at = weights.stat().st_mtime_ns
    assert bootstrap_policy(steps=SHORT_STEPS, seed=0) == folder
    assert weights.stat().st_mtime_ns == built_at

    problems = generate_problems(12, seed=99)
    engine = make_engine(EngineConfig(engine="hf", model=str(folder), temperature=0.0, max_tokens=16))
    completions = engine.generate([Request(**get_world("arith").policy_prompt(p.problem), temperature=0.0, max_tokens=16)
                                   for p in problems])
    engine.close()
    answers = [extract_answer(samples[0].text) for samples in completions]
    assert all(samples[0].text.startswith("\\boxed{") for samples in completions), completions
    assert all(answer is not None and answer.isdigit() for answer in answers), answers


@pytest.mark.slow
def test_an_explicit_out_dir_is_written_there_and_other_settings_rebuild(tmp_path):
    folder = bootstrap_policy(tmp_path / "policy", steps=2, seed=0)
    assert folder == tmp_path / "policy" and (folder / MARKER).exists()
    built_at = (folder / "model.safetensors").stat().st_mtime_ns
    bootstrap_policy(tmp_path / "policy", steps=3, seed=0)
    assert json.loads((folder / MARKER).read_text())["steps"] == 3
    assert (folder / "model.safetensors").stat().st_mtime_ns != built_at


def test_a_policy_built_under_another_float_environment_is_another_warm_start(monkeypatch) -> None:
    cfg, settings = PipelineConfig(), ArithSettings()

    def folder() -> Path:
        return cached_folder(bootstrap_settings(settings.bootstrap_steps, cfg.seed, settings.misconception_rate))

    here, identity = folder(), get_world("arith").built_policy(cfg).identity
    monkeypatch.setattr(bootstrap, "float_environment", lambda: {**float_environment(), "cpu_kernels": "OTHER"})
    assert folder() != here  # the cache never hands one environment's policy to the other
    assert get_world("arith").built_policy(cfg).identity != identity  # so train_initial reruns
