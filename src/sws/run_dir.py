"""The layout of a run directory: every path a command reads or writes in a run is named here, and only here."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from sws.errors import UserError

PILOT_MARKER = ".pilot"
# The folder of the later rounds of `sws run --rounds N` (round r > 1 is `rounds/<r>/`).
LATER_ROUNDS = "rounds"
# The folder of the untargeted-synthesis control (`sws.stages.untargeted`): a run of its own inside the run, marked
# by CONTROL_MARKER.
UNTARGETED = "untargeted"
CONTROL_MARKER = ".control"


@dataclass(frozen=True)
class RunDir:
    root: Path

    def __init__(self, root: Path | str | RunDir) -> None:
        object.__setattr__(self, "root", Path(root.root if isinstance(root, RunDir) else root))

    def check_inside(self, path: Path) -> None:
        """UserError if the folder `path` is written in leads out of the run through a symbolic link (a link
        planted in a shared run directory would otherwise have sws write elsewhere)."""
        root, path = Path(os.path.abspath(self.root)), Path(os.path.abspath(path))
        if not path.is_relative_to(root):
            return
        folder = path.parent.resolve()
        if not folder.is_relative_to(root.resolve()):
            linked = next((parent for parent in reversed(path.parents)
                           if parent.is_relative_to(root) and parent != root and parent.is_symlink()), path.parent)
            raise _link_out(linked, folder)

    def check_folder_links(self) -> None:
        """UserError for the first link to a folder outside the run, anywhere in it: whatever sws wrote into that
        folder (the request cache, shards, checkpoints) would land outside. Links to files are harmless: a
        write replaces the link itself."""
        root = self.root.resolve()
        for folder, subfolders, _ in os.walk(self.root):
            for name in subfolders:  # os.walk lists a link to a folder among the folders, and does not enter it
                path = Path(folder) / name
                if path.is_symlink() and not path.resolve().is_relative_to(root):
                    raise _link_out(path, path.resolve())

    def table(self, name: str) -> Path:
        """An artifact table (`problems`, `adapt/round-1/labeled`, `eval/problems`, ...)."""
        return self.root / f"{name}.parquet"

    def rejected(self, name: str) -> Path:
        """The rows a filtering stage dropped from table `name`, each with its reason."""
        return self.root / f"{name}.rejected.parquet"

    def manifest(self, stage: str) -> Path:
        return self.manifests / f"{stage}.json"

    @property
    def manifests(self) -> Path:
        return self.root / "manifests"

    @property
    def config(self) -> Path:
        """The resolved config the last successful command ran with."""
        return self.root / "config.yaml"

    @property
    def lock(self) -> Path:
        return self.root / ".sws.lock"

    @property
    def caches(self) -> Path:
        """The request and embedding caches; the estimate's pilot and the untargeted control use their run's, so
        the run reuses their answers and they the run's."""
        inside = (self.root / PILOT_MARKER).is_file() or (self.root / CONTROL_MARKER).is_file()
        return (self.root.parent if inside else self.root) / "cache"

    @property
    def request_cache(self) -> Path:
        return self.caches / "requests.sqlite"

    @property
    def estimate(self) -> RunDir:
        """The scratch run of `sws synthesize --estimate`'s pilot (marked by `PILOT_MARKER`); nothing of the run
        itself is written there."""
        return RunDir(self.root / "estimate")

    @property
    def shards(self) -> Path:
        """Shards of model calls run on Ray, each with a completion marker."""
        return self.root / "shards"

    def embedding_cache(self, slug: str) -> Path:
        return self.caches / "embeddings" / f"{slug}.parquet"

    def seed_file(self, world: str) -> Path:
        """The seed set a world's setup step draws for `sws prepare`."""
        return self.root / "seed" / f"{world}.jsonl"

    def pool_file(self, world: str) -> Path:
        """The selection pool a world draws for `sws select` when `select.pool` is empty."""
        return self.root / "pool" / f"{world}.jsonl"

    def train(self, arm: str) -> Path:
        """The folder of an arm's training run (`sws.arms`): checkpoints, log, final model."""
        return self.root / "train" / arm

    def checkpoint(self, arm: str) -> Path:
        """An arm's final model."""
        return final_dir(self.train(arm))

    def cotrain_checkpoints(self, arm: str) -> Path:
        """A co-training arm's step checkpoints (`sws.cotrain.session`): both policies, RNG states, rows."""
        return self.root / "cotrain" / arm / "checkpoints"

    @property
    def initial_checkpoint(self) -> Path:
        """The initially trained policy: what an empty `roles.policy.model` means."""
        return self.checkpoint("initial")

    @property
    def summary(self) -> Path:
        return self.root / "summary.json"

    @property
    def plots(self) -> Path:
        return self.root / "plots"

    @property
    def report(self) -> Path:
        return self.root / "report.html"

    def round(self, number: int) -> RunDir:
        """Round `number` of `sws run --rounds N`: round 1 is the run itself, a later round `rounds/<number>/`."""
        return RunDir(self.root / in_round(number, ""))

    @property
    def untargeted(self) -> RunDir:
        """The run folder of the untargeted-synthesis control: its seed problems, synthesis and training set."""
        return RunDir(self.root / UNTARGETED)

    @property
    def control_marker(self) -> Path:
        """Marks a control's run folder inside a run (`untargeted/`): its caches are the run's."""
        return self.root / CONTROL_MARKER

    @property
    def round_of(self) -> RunDir | None:
        """The run this folder is a later round of (`rounds/<r>/`), or None."""
        folder = self.root.parent
        return RunDir(folder.parent) if folder.name == LATER_ROUNDS and self.root.name.isdigit() else None

    @property
    def round_before(self) -> RunDir:
        """The round a later round takes its inputs from."""
        run = self.round_of
        if run is None:
            raise ValueError(f"{self.root} is no later round of a run")
        return run.round(int(self.root.name) - 1)

    @property
    def ledger(self) -> Path:
        """Every problem weak in any round, per round (`sws run --rounds N`)."""
        return self.table("ledger")


def in_round(number: int, name: str) -> str:
    """Table (or file) `name` of round `number`, named from the run: round 1 is the run itself."""
    if number < 1:
        raise ValueError(f"rounds count from 1, not {number}")
    return name if number == 1 else f"{LATER_ROUNDS}/{number}/{name}"


def _link_out(link: Path, target: Path) -> UserError:
    return UserError(f"{link}: a symbolic link out of the run directory (to {target}); sws writes only inside "
                     "the run: remove the link")


def final_dir(out_dir: Path) -> Path:
    """The final model a training run writes into its folder."""
    return Path(out_dir) / "final"
