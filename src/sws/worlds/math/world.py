"""The math world: MATH-style problems with LaTeX answers, for real policies and real teacher models.

It has no built-in teacher and no policy of its own, so its pipelines name every role and `train.init_model`.
Its benchmarks are the math sets shipped in the package (MATH-500, AIME 2024/2025, GSM8K), which `sws eval`
reads in any world.
"""

from __future__ import annotations

from typing import Any

from sws.world import World
from sws.worlds.math.verifier import MathVerifier

MATH_SUBJECTS = (
    "Algebra", "Counting & Probability", "Geometry", "Intermediate Algebra", "Number Theory", "Prealgebra",
    "Precalculus",
)
INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


class MathWorld(World):
    name = "math"
    categories = MATH_SUBJECTS
    verifier = MathVerifier()

    def policy_prompt(self, problem: str) -> dict[str, Any]:
        # A chat model gets the problem with the usual boxed-answer instruction as one user message.
        return {"messages": ({"role": "user", "content": f"{problem}\n\n{INSTRUCTION}"},)}


WORLD = MathWorld()
