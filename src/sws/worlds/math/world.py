"""The math world: MATH-style problems with LaTeX answers, for real policies and real teacher models.

It has no built-in teacher and no policy of its own, so its pipelines name every role and `train.init_model`.
Its benchmarks are the math sets shipped in the package (MATH-500, AIME 2024/2025, GSM8K), which `sws eval`
reads in any world.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from sws.world import CategoryExample, World
from sws.worlds.math.validation import validation_problems
from sws.worlds.math.verifier import MathVerifier

MATH_SUBJECTS = (
    "Algebra", "Counting & Probability", "Geometry", "Intermediate Algebra", "Number Theory", "Prealgebra",
    "Precalculus",
)
# What each subject of MATH (Hendrycks et al., 2021) covers, written to tell the neighbours apart.
SUBJECT_DESCRIPTIONS = {
    "Algebra": "linear and quadratic equations and inequalities, systems of equations, slopes and lines, "
               "functions and their inverses, exponents and radicals, arithmetic and geometric sequences",
    "Counting & Probability": "counting arrangements and selections (permutations, combinations, binomial "
                              "coefficients, inclusion-exclusion), probability and expected value",
    "Geometry": "lengths, angles, areas and volumes of triangles, circles, polygons and solids; similar and "
                "congruent figures",
    "Intermediate Algebra": "polynomials and their roots, complex numbers, logarithms, inequalities such as "
                            "AM-GM, functional equations, conic sections, harder sums and sequences",
    "Number Theory": "properties of integers: divisors, primes and factorisation, gcd and lcm, remainders and "
                     "modular arithmetic, digits and number bases",
    "Prealgebra": "arithmetic with whole numbers, fractions, decimals and percents, ratios, rates, simple "
                  "equations, basic angle, perimeter and area facts, everyday word problems",
    "Precalculus": "trigonometric functions and identities, vectors, matrices and determinants, complex numbers "
                   "in polar form, polar and parametric coordinates, 3-D coordinate geometry",
}
# One short problem per subject with the summary a categorizer should give it (written for sws, not from MATH).
SUBJECT_EXAMPLES = {
    "Algebra": CategoryExample(
        "If $3x - 7 = 2x + 5$, what is the value of $x^2$?",
        "Solves a linear equation and squares the solution; needs solving linear equations."),
    "Counting & Probability": CategoryExample(
        "A fair coin is flipped 4 times. What is the probability of getting exactly 2 heads?",
        "Asks for the probability of exactly two heads in four flips; needs binomial coefficients."),
    "Geometry": CategoryExample(
        "A right triangle has legs of length 6 and 8. What is the radius of its circumscribed circle?",
        "Asks for the circumradius of a right triangle; needs the Pythagorean theorem and circle facts."),
    "Intermediate Algebra": CategoryExample(
        "Let $r$, $s$ and $t$ be the roots of $x^3 - 4x^2 + x + 6 = 0$. Find $r^2 + s^2 + t^2$.",
        "Asks for the sum of the squared roots of a cubic; needs Vieta's formulas."),
    "Number Theory": CategoryExample(
        "What is the remainder when $7^{100}$ is divided by 5?",
        "Asks for the remainder of a large power; needs modular arithmetic."),
    "Prealgebra": CategoryExample(
        "A shirt costs $\\$40$ and is on sale for 15% off. What is the sale price, in dollars?",
        "Asks for a price after a percent discount; needs percent arithmetic."),
    "Precalculus": CategoryExample(
        "Compute $\\cos 75^\\circ \\cos 15^\\circ$.",
        "Asks for a product of cosines; needs trigonometric identities."),
}
INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


class MathWorld(World):
    name = "math"
    categories = MATH_SUBJECTS
    verifier = MathVerifier()
    category_descriptions = SUBJECT_DESCRIPTIONS
    category_examples = SUBJECT_EXAMPLES

    def policy_prompt(self, problem: str) -> dict[str, Any]:
        # A chat model gets the problem with the usual boxed-answer instruction as one user message.
        return {"messages": ({"role": "user", "content": f"{problem}\n\n{INSTRUCTION}"},)}

    def fresh_problems(self, cfg: Any, seed_problems: pl.DataFrame, n_per_category: int,
                       exclude: set[str] = frozenset()) -> pl.DataFrame:
        """MATH-500 problems of the seed subjects (co-training's validation tasks); no labels of its own, so
        `truth` stays None and a labeler's consistent samples label the synthesizer's cards."""
        return validation_problems(n_per_category, cfg.seed, seed_problems, exclude)


WORLD = MathWorld()
