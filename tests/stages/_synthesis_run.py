"""Shared setup of the synthesis stage tests: arith run directories with the outputs of `sws identify` or of
`sws synthesize`, or ready for `sws eval`, a noisy oracle configuration, and a scripted engine for outputs the oracle never writes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import polars as pl
import pytest
import yaml

from sws.config import EngineConfig, PipelineConfig
from sws.engines import Completion, Engine, Request
from sws.run_dir import RunDir
from sws.tables import write_table
from sws.worlds.arith import generate_problems
from sws.worlds.arith.world import ORACLE

WEAK_CATEGORIES = ("multiplication", "remainders", "multi_step")
NOISE = {"ill_posed": 0.1, "multi_part": 0.1, "multiple_choice": 0.1, "proof": 0.1, "true_false": 0.1,
         "answer_leak": 0.1}


def write_identified_run(run_dir: Path, n_problems: int = 120, weak_categories: tuple[str, ...] = WEAK_CATEGORIES,
                         seed: int = 3) -> pl.DataFrame:
    """problems, weakness and categories as `sws identify` leaves them: medium and hard problems of
    `weak_categories` are weak. Returns the problems."""
    arith = generate_problems(n_problems, seed=seed)
    problems = pl.DataFrame({
        "problem_id": [f"p{index}" for index in range(len(arith))], "problem": [p.problem for p in arith],
        "answer": [p.answer for p in arith], "category": [p.category for p in arith], "source": ["arith"] * len(arith),
    })
    weak = [p.category in weak_categories and p.level != "easy" for p in arith]
    write_table(run_dir, "problems", problems)
    write_table(run_dir, "weakness", pl.DataFrame({
        "problem_id": problems["problem_id"], "category": problems["category"], "accs": [[0.25, 0.125]] * len(arith),
        "n_record": [2] * len(arith), "max_acc": [0.25 if w else 0.875 for w in weak],
        "slope": [-0.125 if w else 0.0 for w in weak], "weak": weak,
    }))
    categories = sorted(set(problems["category"].to_list()))
    n_weak = {c: sum(w for w, p in zip(weak, arith, strict=True) if p.category == c) for c in categories}
    n_all = {c: sum(p.category == c for p in arith) for c in categories}
    total_weak = sum(n_weak.values()) or 1
    write_table(run_dir, "categories", pl.DataFrame({
        "category": categories, "n_problems": [n_all[c] for c in categories], "n_weak": [n_weak[c] for c in categories],
        "fail_ratio": [n_weak[c] / n_all[c] for c in categories],
        "share": [n_weak[c] / total_weak for c in categories],
    }))
    return problems


def write_labeled(run_dir: Path, n: int = 40, seed: int = 2) -> None:
    """labeled.parquet as `sws synthesize` leaves it: n arith problems with their true answers."""
    problems = generate_problems(n, seed=seed)
    write_table(run_dir, "labeled", pl.DataFrame({
        "syn_id": [f"syn-{index}" for index in range(n)],
        "category": [problem.category for problem in problems],
        "concepts": [problem.concepts for problem in problems],
        "level": [problem.level for problem in problems],
        "problem": [problem.problem for problem in problems],
        "answer": [problem.answer for problem in problems],
        "consistency": [1.0] * n,
    }))


def fake_checkpoint(run_dir: Path, name: str) -> Path:

    folder = RunDir(run_dir).checkpoint(name)
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    return folder


def write_evaluable_run(run_dir: Path) -> None:
    """12 arith problems, 8 of them weak (addition 0 of 4, remainders 4, precedence 4), and three checkpoints."""
    problems = generate_problems(12, seed=0, categories=["addition", "remainders", "precedence"])
    write_table(run_dir, "problems", pl.DataFrame({
        "problem_id": [f"p{i}" for i in range(12)], "problem": [p.problem for p in problems],
        "answer": [p.answer for p in problems], "category": [p.category for p in problems],
        "source": ["arith"] * 12}))
    weak = [i % 3 != 0 for i in range(12)]
    write_table(run_dir, "weakness", pl.DataFrame({
        "problem_id": [f"p{i}" for i in range(12)], "category": [p.category for p in problems],
        "accs": [[0.0]] * 12, "n_record": [1] * 12, "max_acc": [0.0] * 12, "slope": [0.0] * 12, "weak": weak}))
    for name in ("initial", "baseline", "augmented"):
        fake_checkpoint(run_dir, name)


def noisy_pipeline_file(tmp_path: Path, budget: int = 60, **synthesize: object) -> Path:
    """pipeline.yaml with the noisy oracle teachers of `noisy_oracle_config` and these synthesize settings."""
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump({
        "roles": {
            "generator": {"engine": "oracle", "model": "arith-oracle", "options": NOISE},
            "judges": [{"engine": "oracle", "model": "arith-oracle", "options": {"judge_error": 0.1}}],
            "labeler": {"engine": "oracle", "model": "arith-oracle", "options": {"labeler_error": 0.2}},
        },
        "synthesize": {"budget": budget, "set_size": 3, **synthesize},
    }))
    return path


def noisy_oracle_config(judge_error: float = 0.1, labeler_error: float = 0.2, **synthesize: object) -> PipelineConfig:
    config = PipelineConfig()
    config.roles.generator = EngineConfig(**ORACLE, options=dict(NOISE))
    config.roles.judges = [EngineConfig(**ORACLE, options={"judge_error": judge_error})]
    config.roles.labeler = EngineConfig(**ORACLE, options={"labeler_error": labeler_error})
    for name, value in synthesize.items():
        setattr(config.synthesize, name, value)
    return config


class ScriptedEngine(Engine):
    """Answers each request with `respond(request, sample_index)`; records what it was asked."""

    name = "scripted"
    model = "scripted"

    def __init__(self, respond: Callable[[Request, int], str]) -> None:
        self.respond = respond
        self.requests: list[Request] = []
        self.closed = False

    def generate(self, requests: list[Request]) -> list[list[Completion]]:
        self.requests.extend(requests)
        return [[Completion(self.respond(request, index)) for index in range(request.n)] for request in requests]

    def close(self) -> None:
        self.closed = True


def use_engines(monkeypatch: pytest.MonkeyPatch, engines: dict[str, ScriptedEngine]) -> None:
    """Route every role whose `model` names a key of `engines` to that scripted engine, behind the run's real
    request cache; other roles get their usual engine."""
    import sws.engines
    from sws.engines import CachedEngine, cache_identity

    real = sws.engines.make_engine

    def make_engine(cfg: EngineConfig, cache: Path | None = None):
        if cfg.model not in engines:
            return real(cfg, cache)
        return CachedEngine(engines[cfg.model], cache, cache_identity(cfg))

    monkeypatch.setattr(sws.engines, "make_engine", make_engine)


def scripted_role(name: str) -> EngineConfig:
    return EngineConfig(engine="oracle", model=name)


class HashedEmbedder:
    """A stand-in sentence model: a fixed pseudo-random unit vector per text (no similarity structure)."""

    def encode(self, texts: list[str], **_: object):
        import hashlib

        import numpy as np

        rows = [np.random.default_rng(int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "big")).normal(size=16)
                for t in texts]
        return np.stack(rows) if rows else np.zeros((0, 16))


def use_hashed_embeddings(monkeypatch: pytest.MonkeyPatch) -> None:
    import sws.embeddings

    monkeypatch.setattr(sws.embeddings, "load_model", lambda name: HashedEmbedder())
