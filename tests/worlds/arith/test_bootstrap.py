import json

import pytest

from sws.config import EngineConfig
from sws.engines import Request, make_engine
from sws.grading import extract_answer
from sws.policy import policy_prompt
from sws.worlds.arith import CATEGORIES, generate_problems
from sws.worlds.arith.bootstrap import BOOTSTRAP_MIX, MARKER, bootstrap_policy, training_example

SHORT_STEPS = 40


def test_training_mix_is_uneven_and_weak_categories_see_no_hard_problems():
    import random

    rng = random.Random(0)
    drawn = [training_example(rng) for _ in range(3000)]
    counts = {category: 0 for category in CATEGORIES}
    for prompt, completion in drawn:
        assert prompt.endswith("\n") and completion.startswith("\\boxed{") and completion.endswith("}")
    from sws.worlds.arith import solve

    for prompt, _ in drawn:
        counts[solve(prompt).category] += 1
    strong = [c for c in CATEGORIES if "hard" in BOOTSTRAP_MIX[c][1]]
    weak = [c for c in CATEGORIES if c not in strong]
    assert strong and weak
    assert min(counts[c] for c in strong) > 2 * max(counts[c] for c in weak)


@pytest.mark.slow
def test_short_bootstrap_answers_in_boxes_the_grader_reads_and_is_cached(tmp_path, monkeypatch):
    monkeypatch.setenv("SWS_CACHE", str(tmp_path / "cache"))
    folder = bootstrap_policy(steps=SHORT_STEPS, seed=0)
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
