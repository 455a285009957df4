"""The arith world's steps in a run, declared as stages: the seed set `sws run` draws for `sws prepare`, and the
selection pool `sws select` draws when `select.pool` is empty. `sws.runner.run_stage` runs them."""

from __future__ import annotations

from pathlib import Path

from sws import ui
from sws.atomic_files import write_jsonl
from sws.config import PipelineConfig
from sws.run_dir import RunDir
from sws.runner import StageContext, StageOutput
from sws.stage import Stage
from sws.world import get_world
from sws.worlds.arith.pool import pool_rows
from sws.worlds.arith.seed_set import seed_set_rows

WORLD_NAME = "arith"


def seed_set_settings(cfg: PipelineConfig, options: dict) -> dict:
    settings = cfg.world_settings
    return {"n": settings.n_seed_problems, "seed": cfg.seed, "levels": settings.seed_levels,
            **({"categories": settings.seed_categories} if settings.seed_categories else {})}


def seed_file(cfg: PipelineConfig, run: RunDir, options: dict) -> list[Path]:
    return [run.seed_file(WORLD_NAME)]


def draw_seed_set(context: StageContext) -> StageOutput:
    """`arith.n_seed_problems` problems of `arith.seed_categories` and `arith.seed_levels`."""
    settings = context.cfg.world_settings
    rows = seed_set_rows(settings.n_seed_problems, context.cfg.seed, settings.seed_categories, settings.seed_levels)
    [path] = seed_file(context.cfg, context.run, context.options)
    ui.info(f"seed set: {len(rows)} arith problems -> {path}")
    return StageOutput(files={path: lambda temporary: write_jsonl(temporary, rows)}, info={"problems": len(rows)})


def pool_settings(cfg: PipelineConfig, options: dict) -> dict:
    return {"n": cfg.world_settings.n_pool_problems, "seed": cfg.seed, **get_world(cfg.world).eval_identity(cfg)}


def pool_file(cfg: PipelineConfig, run: RunDir, options: dict) -> list[Path]:
    return [run.pool_file(WORLD_NAME)]


def draw_pool(context: StageContext) -> StageOutput:
    """`arith.n_pool_problems` fresh problems of every family, none a seed or held-out problem."""
    rows = pool_rows(context.cfg, context.table("problems"), context.cfg.world_settings.n_pool_problems)
    [path] = pool_file(context.cfg, context.run, context.options)
    ui.info(f"pool: {len(rows)} arith problems -> {path}")
    return StageOutput(files={path: lambda temporary: write_jsonl(temporary, rows)}, info={"problems": len(rows)})


SEED_SET = Stage("seed_set", "Draw the arith seed set for `sws prepare`.", draw_seed_set, settings=seed_set_settings,
                 output_files=seed_file, in_run=False)
POOL = Stage("pool", "Draw the arith selection pool for `sws select`.", draw_pool, reads=("problems",),
             settings=pool_settings, output_files=pool_file, in_run=False)
