"""The arms are declared once (`sws.arms.ARMS`) and read everywhere."""

from __future__ import annotations

from sws import arms
from sws.compare import SHORT
from sws.config import PipelineConfig
from sws.stages import train
from sws.tables import SCHEMAS, artifact_kind


def test_every_arm_has_its_training_stage_tables_and_compare_column() -> None:
    for each in arms.ARMS:
        assert train.STAGES[each.name].writes == (each.curve, each.rollouts)
        assert artifact_kind(each.training_set) in SCHEMAS and each.curve in SCHEMAS and SHORT[each.name]


def test_each_control_is_measured_against_the_baseline_and_its_treatment_against_it() -> None:
    differences = set(arms.differences())
    assert {("augmented", "baseline"), ("untargeted", "baseline"), ("augmented", "untargeted"),
            ("selected", "baseline"), ("random_selected", "baseline"),
            ("selected", "random_selected"), ("augmented", "selected")} <= differences
    assert arms.HEADLINE == ("augmented", "baseline")


def test_the_online_filter_applies_to_every_continuing_arm_alike_unless_asked_for_augmented_only() -> None:
    alike = PipelineConfig.model_validate({"train": {"online_filter": [0.125, 0.875]}})
    assert {each.name for each in arms.ARMS if each.filters_online(alike)} == {
        each.name for each in arms.continuing()}
    authors = PipelineConfig.model_validate({"train": {"online_filter": [0.125, 0.875],
                                                       "online_filter_arms": "augmented"}})
    # the untargeted control is trained like augmented, online filter included
    assert {each.name for each in arms.ARMS if each.filters_online(authors)} == {"augmented", "untargeted"}
