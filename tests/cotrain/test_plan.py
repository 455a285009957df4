from rich.console import Console

from sws.config import PipelineConfig
from sws.cotrain.plan import plan_table


def _text(cfg: PipelineConfig) -> str:
    console = Console(record=True, width=400)
    console.print(plan_table(cfg))
    return " ".join(console.export_text().split())


def test_the_plan_states_each_steps_reasoner_rollouts_and_the_work_of_all_arms():
    text = _text(PipelineConfig(cotrain={"arms": ["cotrained", "frozen"], "steps": 5, "batch_size": 8,
                                         "rollouts": 4, "reasoner_tasks": 12}))
    assert "cotrained, frozen: 5 steps each" in text
    assert "8 cards; the reasoner on 12 tasks × 4 rollouts = 48 rollouts" in text
    assert "80 cards, 480 reasoner rollouts, 10 updates of the reasoner" in text
    assert "the world's warm-started synthesizer, trained in this process" in text
    assert "the arith world's own truth" in text


def test_a_math_plan_names_the_servers_base_models_and_the_labeler():
    cfg = PipelineConfig(world="math", roles={"labeler": {"engine": "openai", "model": "some-labeler"}},
                         cotrain={"arms": ["frozen"], "backend": "tinker",
                                  "synthesizer": {"base_model": "org/base", "base_url": "http://gpu:8000"},
                                  "reasoner": {"base_model": "org/base", "lora_rank": 8}})
    text = _text(cfg)
    assert "LoRA adapter (rank 32) of org/base on http://gpu:8000" in text
    assert "LoRA adapter (rank 8) of org/base on the hosted Tinker service" in text
    assert f"some-labeler (openai): {cfg.synthesize.label_samples} samples per card" in text
