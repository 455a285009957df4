import random

from transformers import AutoModelForCausalLM

from sws.cotrain.verify import CardVerifier
from sws.world import get_world
from sws.worlds.arith.synthesizer import MAX_POSITIONS, bootstrap_synthesizer, report_and_card


def test_warm_start_pairs_are_valid_cards_for_a_weak_category_with_the_true_answer():
    rng = random.Random(3)
    for _ in range(20):
        report, card = report_and_card(rng)
        weakest = report.split("\n")[0].removeprefix("weak: ").split()
        verdict, = CardVerifier(get_world("arith").truth, [], [], get_world("arith").verifier).verify_batch([card])
        assert verdict.valid and verdict.reliability == 1.0
        assert verdict.category in [entry.split("=")[0] for entry in weakest]
        assert len(report) + len(card) < MAX_POSITIONS


def test_bootstrap_builds_once_and_reuses(tmp_path):
    folder = bootstrap_synthesizer(steps=4, seed=0, out_dir=tmp_path / "synth")
    mtime = (folder / "model.safetensors").stat().st_mtime_ns
    assert bootstrap_synthesizer(steps=4, seed=0, out_dir=tmp_path / "synth") == folder
    assert (folder / "model.safetensors").stat().st_mtime_ns == mtime
    assert AutoModelForCausalLM.from_pretrained(folder).config.max_position_embeddings == MAX_POSITIONS
