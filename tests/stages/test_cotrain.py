from sws.config import PipelineConfig
from sws.cotrain.arms import COTRAIN_ARMS
from sws.pipeline import pipeline_steps
from sws.stages.cotrain import DECLARED, step_settings


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
        "bootstrap policy", "seed set", "prepare", "cotrain cotrained", "cotrain static", "report"]
