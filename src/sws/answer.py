"""The answer a run was built to give: each arm on each held-out set, and the differences `sws.arms` declares.

Every cell is Avg@k (the share of k sampled answers that are right, averaged over the set's problems) with its
standard error over the problems; each difference (`Arm.compared_with`: this arm − that one) is in points with
its paired standard error, problem by problem, and is marked where it clears two standard errors. The run's
last screen (`sws run`) and the report both open with this table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import polars as pl

from sws import arms

# What a difference must clear, in standard errors, to be marked.
CLEARS = 2.0
MARK = "*"
MEASURE = "Avg@k"
DEFINITION = (f"{MEASURE}: the share of k sampled answers that are right, averaged over the set's problems, "
              "± one standard error over the problems. Differences are in points (pts), ± their paired standard "
              f"error; {MARK} marks one that clears {CLEARS:g} standard errors. Held-out: no arm trained on the "
              "set's problems.")


def name_of(arm: arms.Arm) -> str:
    """The one name the run's outputs give an arm."""
    return arm.label or arm.name


def names() -> dict[str, str]:
    """Each arm's one name, by the name it is declared with."""
    return {arm.name: name_of(arm) for arm in arms.ARMS}


@dataclass(frozen=True)
class Estimate:
    """A mean (as a share) and its standard error, or None where fewer than two problems were graded."""

    mean: float
    error: float | None

    def as_share(self) -> str:
        text = f"{100 * self.mean:.1f} %"
        return text if self.error is None else f"{text} ± {100 * self.error:.1f}"

    def as_points(self) -> str:
        text = f"{round(100 * self.mean, 1) or 0.0:+.1f}"  # a mean that rounds to zero is +0.0, never -0.0
        if self.error is None:
            return f"{text} pts"
        return f"{text} ± {100 * self.error:.1f} pts" + (f" {MARK}" if self.clears() else "")

    def clears(self) -> bool:
        return self.error is not None and abs(self.mean) >= CLEARS * self.error and self.error > 0


def per_problem_scores(per_problem: pl.DataFrame, eval_set: str, checkpoint: str) -> pl.DataFrame:
    """`problem_id, pass1, avg_k` of one checkpoint on one set: the greedy verdict and the share of right samples
    (null where ungraded)."""
    return per_problem.filter((pl.col("eval_set") == eval_set) & (pl.col("checkpoint") == checkpoint)).select(
        "problem_id", pl.col("greedy_correct").cast(pl.Float64).alias("pass1"),
        pl.when(pl.col("n") > 0).then(pl.col("n_correct") / pl.col("n")).alias("avg_k"))


def mean_error(values: pl.Series) -> float | None:
    """The standard error of the mean of the non-null values (sample sd / √n); None with fewer than two."""
    values = values.drop_nulls()
    return None if values.len() < 2 else float(values.std()) / math.sqrt(values.len())


def estimate(values: pl.Series) -> Estimate | None:
    values = values.drop_nulls()
    if values.len() == 0:
        return None
    return Estimate(float(values.mean()), mean_error(values))


FIRST_COLUMN = "arm, or difference"


def answer_table(per_problem: pl.DataFrame, held_out_sets: list[str]) -> pl.DataFrame:
    """One row per evaluated arm, then one per declared difference; one column per held-out set evaluated,
    headed with its problems (so that many arms still fit a log's width)."""
    present = set(per_problem["checkpoint"])
    shown = [arm for arm in arms.compared() if arm.name in present]
    pairs = [(ahead, behind) for ahead, behind in arms.differences() if {ahead, behind} <= present]
    columns: dict[str, list[str]] = {FIRST_COLUMN: [name_of(arm) for arm in shown]
                                     + [difference_name(ahead, behind) for ahead, behind in pairs]}
    for eval_set in held_out_sets:
        shares = {arm.name: per_problem_scores(per_problem, eval_set, arm.name) for arm in shown}
        if not any(table.height for table in shares.values()):
            continue
        cells = [shown_share(estimate(shares[arm.name]["avg_k"])) for arm in shown]
        for ahead, behind in pairs:
            paired = shares[ahead].join(shares[behind], on="problem_id", suffix="_behind")
            found = estimate(paired["avg_k"] - paired["avg_k_behind"])
            cells.append("–" if found is None else found.as_points())
        columns[f"{eval_set} (n={max(table.height for table in shares.values())})"] = cells
    return pl.DataFrame(columns) if len(columns) > 1 else pl.DataFrame()


def shown_share(found: Estimate | None) -> str:
    return "–" if found is None else found.as_share()


def difference_name(ahead: str, behind: str) -> str:
    return f"{name_of(arms.arm(ahead))} − {name_of(arms.arm(behind))}"


def held_out_sets(sets: pl.DataFrame) -> list[str]:
    """The held-out sets of `eval/sets`, in its order."""
    return sets.filter(pl.col("held_out"))["eval_set"].unique(maintain_order=True).to_list()
