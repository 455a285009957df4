import ast
from pathlib import Path

import pytest

import sws
from sws.config import PipelineConfig
from sws.cotrain.arms import COTRAIN_ARMS
from sws.errors import UserError
from sws.pipeline import pipeline_steps
from sws.stages.cotrain import DECLARED, initial_settings, step_settings, world_synthesizer
from sws.world import get_world


def _arm(name):
    return next(arm for arm in COTRAIN_ARMS if arm.name == name)


def _differences(left, right):
    return {key for key, value in step_settings(left, PipelineConfig().cotrain).__dict__.items()
            if step_settings(right, PipelineConfig().cotrain).__dict__[key] != value}


def test_the_frozen_arm_differs_from_the_cotrained_one_by_the_update_switch_alone():
    assert _differences(_arm("frozen"), _arm("cotrained")) == {"update_synthesizer"}
    assert _differences(_arm("shuffled"), _arm("cotrained")) == {"shuffle_synthesizer_rewards"}


def test_no_arm_runs_unless_listed_and_a_cotraining_pipeline_runs_only_its_stages():
    assert not any(stage.is_on(PipelineConfig()) for stage in DECLARED)
    cfg = PipelineConfig(cotrain={"arms": ["cotrained", "static"], "only": True})
    assert [step.name for step in pipeline_steps(cfg)] == [
        "bootstrap policy", "seed set", "prepare", "cotrain initial reasoner", "cotrain cotrained", "cotrain static",
        "report"]


def test_the_initial_reasoners_answers_stay_current_when_only_the_training_changes():
    base = initial_settings(PipelineConfig(cotrain={"arms": ["frozen"]}), {})
    trained_otherwise = PipelineConfig(cotrain={"arms": ["cotrained"], "steps": 3, "batch_size": 4,
                                                "synthesizer_learning_rate": 1e-5, "reasoner_learning_rate": 1e-5})
    assert initial_settings(trained_otherwise, {}) == base
    for changed in ({"validation_rollouts": 8}, {"validation_per_category": 3}, {"reasoner_temperature": 0.7}):
        assert initial_settings(PipelineConfig(cotrain={"arms": ["frozen"], **changed}), {}) != base
    assert initial_settings(PipelineConfig(seed=1), {}) != initial_settings(PipelineConfig(seed=2), {})


def test_a_world_without_a_synthesizer_is_refused_in_one_line_on_the_local_backend():
    import word_world

    for world in (word_world.WORLD, get_world("math")):
        with pytest.raises(UserError, match=rf"^run/config.yaml: field 'cotrain.backend' is 'local', but world "
                                            rf"'{world.name}' brings no synthesizer.*set cotrain.backend: tinker"):
            world_synthesizer(world, PipelineConfig(world=world.name), "run/config.yaml")
    assert world_synthesizer(get_world("arith"), PipelineConfig(), "run/config.yaml").identity


def test_cotraining_reaches_a_world_only_through_its_hooks():
    source = Path(sws.__file__).parent
    modules = [*(source / "cotrain").glob("*.py"), source / "stages" / "cotrain.py"]
    imported = {module.name: [name for node in ast.walk(ast.parse(module.read_text()))
                              for name in ([node.module or ""] if isinstance(node, ast.ImportFrom)
                                           else [alias.name for alias in getattr(node, "names", [])]
                                           if isinstance(node, ast.Import) else [])
                              if name.startswith("sws.worlds")]
                for module in modules}
    assert len(modules) > 10 and not any(imported.values()), imported
