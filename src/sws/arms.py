"""The training arms: one declaration per GRPO-trained policy of the method (DESIGN §1 stages 1 and 6).

An `Arm` names the table it trains on, the arm whose policy it starts from (None: `train.init_model`, or the
policy the world builds), how many steps it trains, whether the config asks for it, its rollout log, the arms it
trains side by side with, and how the report and `sws compare` name it. Everything about arms reads `ARMS`: the
schemas of each arm's curve and rollout log (`sws.tables`), the training stages (`train_<arm>`, `sws train
<arm>`, `sws run`), the checkpoints `sws eval` evaluates, the held-out rule (no held-out problem is one any arm
trains on), the report, `sws compare` and the run's headline. Adding an arm is one entry in `ARMS`, plus the stage
that builds its training set when that set is new.

`ARMS` is in the order results list the arms: the initial policy, then the arms that continue from it, the
baseline (seed only) before the arms measured against it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sws.errors import UserError


@dataclass(frozen=True)
class Arm:
    name: str
    # The table it trains on.
    training_set: str
    # The arm whose final policy it starts from; None: `train.init_model`, or the policy the world builds.
    starts_from: str | None
    # The `train` field that sets its steps (`sws train <arm> --steps` sets it too).
    steps_field: str
    # When that field is unset: as many steps as this arm.
    steps_as: str | None = None
    # Whether the config asks for it (None: always).
    runs_when: Callable[[Any], bool] | None = None
    # Arms with the same group train side by side where they can (`train.side_by_side`).
    side_by_side: str | None = None
    # Keeps only the rollout groups in `train.online_filter` (the SwS authors' dynamic sampling) even with
    # `train.online_filter_arms: augmented`; by default every continuing arm filters alike.
    online_filter: bool = False
    # Its rollout log (what `sws identify` reads for the initial arm); default `train/<name>/rollouts`.
    rollout_log: str = ""
    # The arms it is measured against (this arm − that one): in eval's standard errors, the report, the headline
    # and `sws compare`.
    compared_with: tuple[str, ...] = ()
    # How the report's arms section heads its column, and `sws compare` its column and differences.
    label: str = ""
    short: str = ""
    # How `sws compare`'s verdict names it when another arm is ahead of it, and its table's caption line.
    called: str = ""
    caption: str = ""

    @property
    def curve(self) -> str:
        return f"train/{self.name}/curve"

    @property
    def rollouts(self) -> str:
        return self.rollout_log or f"train/{self.name}/rollouts"

    def steps(self, cfg: Any) -> int:
        """GRPO steps of the arm under config `cfg`."""
        steps = getattr(cfg.train, self.steps_field)
        if steps is None and self.steps_as is not None:
            return arm(self.steps_as).steps(cfg)
        return steps

    def filters_online(self, cfg: Any) -> bool:
        """Whether its training keeps only the rollout groups in `train.online_filter` (when that is set)."""
        return self.online_filter or (self.starts_from is not None and cfg.train.online_filter_arms == "continuations")

    def is_on(self, cfg: Any) -> bool:
        return self.runs_when is None or self.runs_when(cfg)


ARMS: tuple[Arm, ...] = (
    Arm("initial", "problems", None, "initial_steps", rollout_log="rollouts", short="init"),
    Arm("baseline", "problems", "initial", "baseline_steps", steps_as="augmented", side_by_side="continuations",
        label="seed only", short="base", called="the baseline"),
    Arm("augmented", "augmented", "initial", "augmented_steps", side_by_side="continuations", online_filter=True,
        compared_with=("baseline", "selected", "untargeted"), label="synthetic", short="aug",
        caption="aug − base: augmented − baseline, in points"),
    # Its control (`synthesize.untargeted_arm`): the same synthesis fed by random seed problems, trained alike.
    Arm("untargeted", "untargeted/augmented", "initial", "augmented_steps", online_filter=True,
        runs_when=lambda cfg: cfg.synthesize.untargeted_arm, compared_with=("baseline",), label="untargeted",
        short="untg", called="untargeted synthesis",
        caption="untg: the untargeted control (seed ∪ synthesis from random seed problems)"),
    # Selection against synthesis (`select.arm`): seed ∪ the pool problems `sws select` took, as long as augmented.
    Arm("selected", "selected_mix", "initial", "augmented_steps", runs_when=lambda cfg: cfg.select.arm,
        side_by_side="selection", compared_with=("baseline", "random_selected"), label="selected", short="sel",
        caption="sel: the selected arm (seed ∪ pool problems nearest the weak ones)"),
    # Its control (`select.random_arm`, paper §4.3): seed ∪ as many pool problems drawn at random, band-filtered alike.
    Arm("random_selected", "random_selected_mix", "initial", "augmented_steps",
        runs_when=lambda cfg: cfg.select.random_arm, side_by_side="selection", compared_with=("baseline",),
        label="random pool",
        short="rsel", called="random selection",
        caption="rsel: the random-selection control (seed ∪ as many pool problems drawn at random)"),
    # The upper bound (`oracle_family.arm`): seed ∪ as many fresh problems of the weak problems' own families as
    # augmented adds, and a larger dose of them; the ideal targeted data, so the instrument's range.
    Arm("oracle_family", "oracle_family_mix", "initial", "augmented_steps",
        runs_when=lambda cfg: cfg.oracle_family.arm, side_by_side="upper_bound", compared_with=("baseline",),
        label="family oracle", short="orc", called="the family oracle",
        caption="orc: the upper bound (seed ∪ as many fresh problems of the weak problems' families)"),
    Arm("oracle_family_large", "oracle_family_large_mix", "initial", "augmented_steps",
        runs_when=lambda cfg: cfg.oracle_family.arm, side_by_side="upper_bound", compared_with=("baseline",),
        label="family oracle, more", short="orcL", called="the larger family oracle",
        caption="orcL: the upper bound at oracle_family.large_factor times the dose"),
)
NAMES = tuple(each.name for each in ARMS)
# What `sws eval` evaluates besides the arms: `base` (train.init_model before any training) and `start` (the
# policy the world builds for the initial arm, when it is built).
UNTRAINED = ("base", "start")
CHECKPOINTS = (*UNTRAINED, *NAMES)


def arm(name: str) -> Arm:
    """The arm `name`; a UserError lists the arms."""
    for each in ARMS:
        if each.name == name:
            return each
    raise UserError(f"training kind '{name}' is not known; use one of: {', '.join(NAMES)}")


def differences() -> tuple[tuple[str, str], ...]:
    """(ahead, behind) for every arm and each arm it is measured against, grouped by the arm behind (in `ARMS`
    order): the differences to the baseline first."""
    pairs = [(each.name, behind) for each in ARMS for behind in each.compared_with]
    return tuple(sorted(pairs, key=lambda pair: (NAMES.index(pair[1]), NAMES.index(pair[0]))))


# The difference the method is about (augmented − baseline): the headline's, with its paired standard error.
HEADLINE = differences()[0]


def against(behind: str) -> tuple[tuple[str, str], ...]:
    """The differences measured against arm `behind`."""
    return tuple(pair for pair in differences() if pair[1] == behind)


def continuing() -> tuple[Arm, ...]:
    """The arms that continue from another arm's policy."""
    return tuple(each for each in ARMS if each.starts_from is not None)


def compared() -> tuple[Arm, ...]:
    """The arms some difference involves, in `ARMS` order (those the report's arms section sets side by side)."""
    names = {name for pair in differences() for name in pair}
    return tuple(each for each in ARMS if each.name in names)


def every_round() -> tuple[Arm, ...]:
    """The arms every run trains, whatever its config asks (each round's numbers report them)."""
    return tuple(each for each in ARMS if each.runs_when is None)


def side_by_side_groups() -> dict[str, tuple[Arm, ...]]:
    """Group name -> its arms, in `ARMS` order."""
    groups: dict[str, tuple[Arm, ...]] = {}
    for each in ARMS:
        if each.side_by_side is not None:
            groups[each.side_by_side] = (*groups.get(each.side_by_side, ()), each)
    return groups


def training_sets() -> tuple[str, ...]:
    """Every table some arm trains on: no held-out problem may be one of theirs."""
    return tuple(dict.fromkeys(each.training_set for each in ARMS))
