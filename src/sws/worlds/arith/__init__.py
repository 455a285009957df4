"""The built-in arithmetic world (DESIGN §6): problem families, ground truth, the tiny policy, its bootstrap.

The oracle teacher that plays extractor, generator, judges and labeler lives in `sws.engines.oracle`.
"""

from sws.worlds.arith.families import CATEGORIES, LEVELS, ArithProblem, generate_problems
from sws.worlds.arith.truth import DEFECT_KINDS, ProblemTruth, solve

__all__ = [
    "CATEGORIES", "LEVELS", "DEFECT_KINDS", "ArithProblem", "ProblemTruth", "generate_problems", "solve",
]
