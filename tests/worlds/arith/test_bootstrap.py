import json
import random
from collections import Counter

import pytest

from sws.config import EngineConfig
from sws.engines import Request, make_engine
from sws.grading import extract_answer
from sws.policy import policy_prompt
from sws.worlds.arith import CATEGORIES, generate_problems, solve
from sws.worlds.arith.bootstrap import (
    BOOTSTRAP_MIX,
    MARKER,
    bootstrap_policy,
    cached_bootstrap_policy,
    training_example,
)

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


def test_hard_problems_are_never_shown():
    rng = random.Random(1)
    hard_texts = {p.problem for p in generate_problems(1500, seed=1, levels=["hard"])}
    shown = {training_example(rng, 0.9)[0].strip() for _ in range(1500)}
    assert not shown & hard_texts


def test_another_policy_shape_is_another_cache_entry(monkeypatch):
    from sws.worlds.arith import policy
    from sws.worlds.arith.bootstrap import bootstrap_settings, settings_hash

    shipped = settings_hash(bootstrap_settings(100, seed=0))
    monkeypatch.setattr(policy, "HIDDEN_SIZE", 2 * policy.HIDDEN_SIZE)
    assert settings_hash(bootstrap_settings(100, seed=0)) != shipped


@pytest.mark.slow
def test_short_bootstrap_answers_in_boxes_the_grader_reads_and_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("SWS_CACHE", str(tmp_path / "cache"))
    assert cached_bootstrap_policy(SHORT_STEPS, seed=0) is None
    folder = bootstrap_policy(steps=SHORT_STEPS, seed=0)
    assert cached_bootstrap_policy(SHORT_STEPS, seed=0) == folder
    assert cached_bootstrap_policy(SHORT_STEPS + 1, seed=0) is None
    assert folder.parent == tmp_path / "cache" / "policies"
    assert json.loads((folder / MARKER).read_text())["steps"] == SHORT_STEPS
    weights = folder / "model.safetensors"
    built_at = weights.stat().st_mtime_ns
    assert bootstrap_policy(steps=SHORT_STEPS, seed=0) == folder
    assert weights.stat().st_mtime_ns == built_at

    problems = generate_problems(12, seed=99)
    engine = make_engine(EngineConfig(engine="hf", model=str(folder), temperature=0.0, max_tokens=16))
    completions = engine.generate([Request(**policy_prompt(p.problem, "arith"), temperature=0.0, max_tokens=16)
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
