"""A co-training pipeline's plan, for `sws run --dry-run`: the arms and their steps, where each policy trains,
what one step does (cards, the reasoner's tasks and rollouts), how the cards are labeled, the held-out
evaluation, and the work of all the arms together; then what the pipeline file says has not been run."""

from __future__ import annotations

from rich.table import Table

from sws.config import PipelineConfig
from sws.cotrain.backend import Role, TinkerPolicyConfig
from sws.cotrain.labeler import labeled_by_samples
from sws.world import get_world


def plan_table(cfg: PipelineConfig) -> Table:
    section = cfg.cotrain
    arms, steps, cards, rollouts = len(section.arms), section.steps, section.batch_size, section.rollouts
    tasks = section.reasoner_tasks or cards
    table = Table(title="co-training plan", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("plan")
    table.add_row("arms", f"{', '.join(section.arms)}: {steps} steps each, one after the other; first the "
                          "initial reasoner answers the held-out tasks")
    for role in ("synthesizer", "reasoner"):
        table.add_row(role, _where(cfg, role))
    table.add_row("one step", f"{cards} cards; the reasoner on {tasks} tasks × {rollouts} rollouts = "
                              f"{tasks * rollouts} rollouts (the valid cards, topped up with earlier accepted "
                              "tasks, then seed problems), in every arm alike")
    table.add_row("labels", _labels(cfg))
    table.add_row("held out", f"{section.validation_per_category} tasks per seed category, "
                              f"{section.validation_rollouts} answers each, by the initial reasoner and each "
                              "arm's final one (Retain, Learn)")
    table.add_row("in all", f"{arms * steps * cards} cards, {arms * steps * tasks * rollouts} reasoner rollouts, "
                            f"{arms * steps} updates of the reasoner")
    return table


def _where(cfg: PipelineConfig, role: Role) -> str:
    section = cfg.cotrain
    rate = section.synthesizer_learning_rate if role == "synthesizer" else section.reasoner_learning_rate
    temperature = section.synthesizer_temperature if role == "synthesizer" else section.reasoner_temperature
    tokens = section.synthesizer_max_tokens if role == "synthesizer" else section.reasoner_max_tokens
    sampled = f"learning rate {rate:g}, temperature {temperature:g}, up to {tokens} new tokens"
    policy: TinkerPolicyConfig | None = getattr(section, role)
    if section.backend == "tinker" and policy is not None:
        server = policy.base_url or "the hosted Tinker service"
        return f"LoRA adapter (rank {policy.lora_rank}) of {policy.base_model} on {server}; {sampled}"
    start = ("the world's warm-started synthesizer" if role == "synthesizer"
             else cfg.train.init_model or "the world's built policy")
    return f"{start}, trained in this process; {sampled}"


def _labels(cfg: PipelineConfig) -> str:
    if not labeled_by_samples(get_world(cfg.world)):
        return f"the {cfg.world} world's own truth"
    labeler = cfg.roles.labeler
    who = f"{labeler.model} ({labeler.engine})" if labeler is not None else "the labeler role (not set)"
    return (f"{who}: {cfg.synthesize.label_samples} samples per card past the checks, the largest group's answer "
            f"kept at consistency ≥ {cfg.synthesize.min_consistency:g}")
