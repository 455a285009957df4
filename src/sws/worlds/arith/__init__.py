"""The built-in arithmetic world (DESIGN §6): problem families, ground truth, the tiny policy, its bootstrap.

The oracle teacher that plays extractor, generator, judges and labeler is `sws.worlds.arith.oracle`; what the
pipeline sees of the world is `sws.worlds.arith.world`. The policy functions import torch and transformers, so
they load on first use, keeping `import sws.worlds.arith` light.
"""

from __future__ import annotations

import importlib
from typing import Any

from sws.worlds.arith.families import CATEGORIES, LEVELS, ArithProblem, generate_problems
from sws.worlds.arith.truth import DEFECT_KINDS, ProblemTruth, solve

_LAZY = {
    "build_policy": "sws.worlds.arith.policy",
    "bootstrap_policy": "sws.worlds.arith.bootstrap",
    "category_accuracy": "sws.worlds.arith.evaluation",
}

__all__ = [
    "CATEGORIES", "DEFECT_KINDS", "LEVELS", "ArithProblem", "ProblemTruth", "bootstrap_policy", "build_policy",
    "category_accuracy", "generate_problems", "solve",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
