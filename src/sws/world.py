"""Worlds: what a kind of problem brings to the generic pipeline, found by name in one registry.

A world owns its setup steps (the arith world draws a seed set and warm-starts a tiny policy), its own settings
section (`arith:` in a pipeline file), the defaults of the teacher roles a pipeline leaves out, the engines it
brings (the arith oracle), its prompt templates, how a problem is put to the policy, its verifier (answer
extraction and equivalence, `sws.verifier`), the policy it trains from when `train.init_model` is empty, and its
held-out evaluation sets. Generic code reaches a world only through
`get_world(name)`. A new world is one folder `sws/worlds/<name>/` whose `world.py` defines `WORLD`, an
instance of a `World` subclass; a world that lives elsewhere (a test's, a plug-in's) calls `register_world`.
Worlds are found without being imported, and each is imported on first use.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import pkgutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import polars as pl

from sws.errors import UserError
from sws.verifier import Verifier

# A built-in world is a package `sws/worlds/<name>/` whose module `world.py` holds its instance as `WORLD`.
WORLDS_PACKAGE = "sws.worlds"
_registered: dict[str, World] = {}
# The columns of a set of problems a world hands to `sws eval`.
PROBLEM_SET_SCHEMA = {"problem_id": pl.Utf8, "problem": pl.Utf8, "answer": pl.Utf8, "category": pl.Utf8}


@dataclass(frozen=True)
class PipelineStep:
    """A setup step a world runs before `sws prepare` in `sws run` (the arith seed set, say)."""

    name: str
    run: Callable[[Any, Path, bool], Any]
    # For a step that keeps what it makes outside the run (no manifest): (config) -> why it would run, None when
    # what it makes is there. None: the step runs its stages through the runner.
    would_run: Callable[[Any], str | None] | None = None


@dataclass(frozen=True)
class CategoryExample:
    """A problem of a category and the summary a categorizer should give it (a few-shot example)."""

    problem: str
    summary: str


@dataclass(frozen=True)
class BuiltPolicy:
    """The policy a world trains from when `train.init_model` is empty: what decides it, how to build it, and
    where it already is (None: not built yet; evaluating it must not mean training it)."""

    identity: dict[str, Any]
    build: Callable[[], Path]
    cached: Callable[[], Path | None]


@dataclass(frozen=True)
class Truth:
    """A problem as a world that computes answers itself judges it: its answer, category and concepts when it is
    well-posed (`reject_reason` None), else why not (a defect: `ill_posed`, `multiple_choice`, ...)."""

    reject_reason: str | None
    answer: str | None = None
    category: str | None = None
    concepts: tuple[str, ...] = ()


class World:
    """The base every world extends; each hook's default is what a world without that part needs."""

    name: ClassVar[str]
    # The pydantic model of the world's own section of a pipeline file (named as the world); None: no section.
    settings_model: ClassVar[type | None] = None
    # Engine settings for each teacher role a pipeline leaves out; empty: the pipeline must name real models.
    default_roles: ClassVar[dict[str, Any]] = {}
    # Engines only this world can serve ({engine name: "module:Class" or the class}), like the arith world's
    # rule-based oracle.
    engines: ClassVar[dict[str, Any]] = {}
    # Category spellings `sws prepare` prefers when it meets another spelling of one of them.
    categories: ClassVar[tuple[str, ...]] = ()
    # What each category covers, in one line, for the categorizer's prompt (a small model cannot tell Algebra
    # from Intermediate Algebra by name); and an example problem of each (`prepare.categorize_examples`).
    category_descriptions: ClassVar[dict[str, str]] = {}
    category_examples: ClassVar[dict[str, CategoryExample]] = {}
    # A sentence for the report when one of `engines` played a teacher role (`{roles}` is replaced).
    teacher_note: ClassVar[str] = ""
    # Answer extraction and equivalence: what label, audit, the filter, eval and the training rewards grade with.
    verifier: ClassVar[Verifier]
    # A folder of prompt templates (`sws.prompts`) replacing the shipped ones of the same name; None: none.
    prompt_dir: ClassVar[Path | None] = None

    def settings(self, cfg: Any) -> Any:
        """This world's settings section of a pipeline config."""
        return cfg.world_settings

    def setup_steps(self) -> list[PipelineStep]:
        return []

    def seed_input(self, run_dir: Path) -> Path | None:
        """The file `sws prepare` reads when `prepare.input` is not set (written by a setup step), if any."""
        return None

    def policy_prompt(self, problem: str) -> dict[str, Any]:
        """Request fields (`prompt` or `messages`) that put `problem` to the policy."""
        raise NotImplementedError

    def built_policy(self, cfg: Any) -> BuiltPolicy | None:
        """The policy `sws train initial` starts from when `train.init_model` is empty; None: it must be set."""
        return None

    def synthesizer(self, cfg: Any) -> BuiltPolicy | None:
        """The warm-started synthesizer co-training (`sws cotrain-<arm>`) starts from; None: the world cannot
        co-train."""
        return None

    def truth(self, problem: str) -> Truth | None:
        """The world's own verdict on a problem, where it can compute one (the arith world); None: labels must come
        from a labeler's consistent samples."""
        return None

    def fresh_problems(self, cfg: Any, seed_problems: Any, n_per_category: int,
                       exclude: set[str] = frozenset()) -> Any | None:
        """`n_per_category` fresh problems (problem_id, problem, answer, category) of each category of
        `seed_problems`, none a seed problem nor one whose `problem_key` is in `exclude`; None: the world cannot
        make problems."""
        return None

    def heldout_set(self, name: str, cfg: Any, seed_problems: Any, exclude: set[str] = frozenset()) -> Any | None:
        """The world's own held-out set `name` of `eval.benchmarks` (problem_id, problem, answer, category),
        never a problem of `seed_problems` nor one whose `problem_key` is in `exclude` (the training problems);
        None when the world has no set of that name."""
        return None

    def weak_like_set(self, cfg: Any, problems: Any, weakness: Any, exclude: set[str]) -> Any | None:
        """Fresh problems like the run's weak ones (their families, say), if the world can make them: they tell a
        learned skill from learned problems. None of them may have a `problem_key` in `exclude` (every problem a
        checkpoint trains on). None: the world cannot make such problems."""
        return None

    def oracle_family_set(self, cfg: Any, problems: Any, weakness: Any, n: int) -> Any | None:
        """`n` fresh problems of the weak problems' own families (problem_id, problem, answer, category), none a
        seed problem: the upper-bound arm's added problems (`oracle_family.arm`). None: the world cannot make
        them."""
        return None

    def category_shows(self, category: str, concepts: Sequence[str]) -> bool | None:
        """Whether some problem of `category` can show every concept of `concepts`; None: the world cannot say
        (`sws synthesize` then reports no showable share for the sets it requests)."""
        return None

    def family_of(self, problem: str) -> str | None:
        """The family a problem belongs to, finer than its category (where the report and `sws compare` break the
        held-out effect down); None: the world tags no families."""
        return None

    def selection_pool(self, cfg: Any, run_dir: Path, force: bool = False) -> Path | None:
        """The pool `sws select` takes problems from when `select.pool` is empty, drawn into the run (after `sws
        prepare`); None: the world has none, so the pool must be given."""
        return None

    def eval_identity(self, cfg: Any) -> dict[str, Any]:
        """World settings that change what `sws eval` measures (part of its manifest's config)."""
        return {}

    def add_commands(self, group: Any, command: Callable[..., Any]) -> None:
        """Add the world's own commands to `sws world` (`command(name, group=group)` registers one)."""


def register_world(world: World) -> World:
    """Make `world` reachable by its name (a world outside `sws/worlds/`, e.g. a test's)."""
    _registered[world.name] = _checked(world)
    return world


def _checked(world: World) -> World:
    if not isinstance(getattr(world, "verifier", None), Verifier):
        raise TypeError(f"world '{world.name}' sets no verifier: give its class `verifier = <a sws.verifier."
                        "Verifier subclass>()`")
    return world


@functools.cache
def built_in_names() -> tuple[str, ...]:
    """The folders of `sws/worlds/` that hold a world (found without importing any of them)."""
    spec = importlib.util.find_spec(WORLDS_PACKAGE)
    folders = spec.submodule_search_locations if spec is not None else None
    return tuple(sorted(module.name for module in pkgutil.iter_modules(folders or [])
                        if module.ispkg and (Path(module.module_finder.path) / module.name / "world.py").exists()))


def world_names() -> list[str]:
    return sorted({*built_in_names(), *_registered})


def get_world(name: str) -> World:
    if name not in _registered:
        if name not in built_in_names():
            raise UserError(f"world '{name}' is not known (field 'world' of the pipeline config); "
                            f"use one of: {', '.join(world_names())}")
        _registered[name] = _checked(importlib.import_module(f"{WORLDS_PACKAGE}.{name}.world").WORLD)
    return _registered[name]


def all_worlds() -> list[World]:
    return [get_world(name) for name in world_names()]


def engine_world(engine: str) -> World | None:
    """The world that brings engine `engine`, if one does."""
    return next((world for world in all_worlds() if engine in world.engines), None)
