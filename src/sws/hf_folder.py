"""The folder `sws export hf` writes: empty, or one it wrote before, so that `--push` uploads only the export.

A marker file says the folder is sws's. Into a folder without it that holds anything, nothing is written (a
foreign README.md would be overwritten, foreign files uploaded). In a marked folder, a file that is not one
sws writes there is refused too; sws's own files that this export does not write again (a config the run no
longer has, a temporary of a killed export) are removed before writing.
"""

from __future__ import annotations

import os
from pathlib import Path

from sws.atomic_files import is_temporary, write_text
from sws.errors import UserError

MARKER = ".sws-export"


def check_folder(out: Path, own_files: set[str]) -> None:
    """Refuse `out` unless it is missing, empty, or marked and holding only `own_files` (paths relative to
    it) and temporaries. Writes nothing."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise UserError(f"{out}: not a folder; choose another --out")
    if not out.exists() or not any(out.iterdir()):
        return
    if not (out / MARKER).is_file():
        raise UserError(f"{out}: not empty and not written by `sws export hf` (no {MARKER} file in it); "
                        "choose an empty or new folder for --out")
    foreign = sorted(name for name in _files(out) if name not in own_files and name != MARKER
                     and not _temporary(name))
    if foreign:
        raise UserError(f"{out}: holds {foreign[0]}, which `sws export hf` did not write and --push would "
                        "upload; move it out of the folder or choose another --out")


def claim_folder(out: Path, own_files: set[str], written: set[str]) -> None:
    """Mark `out` as sws's, then remove its own files that this export will not write again (`written`)."""
    write_text(out / MARKER, "written by `sws export hf`; it rewrites this folder and nothing else\n")
    for name in _files(out):
        if _temporary(name) or (name in own_files and name not in written):
            (out / name).unlink()
    for folder, _, _ in os.walk(out, topdown=False):
        if Path(folder) != out and not any(Path(folder).iterdir()):
            Path(folder).rmdir()


def _files(out: Path) -> list[str]:
    """Every entry of `out` that is not a real folder (a link to a folder is an entry, never followed)."""
    names = []
    for folder, subfolders, files in os.walk(out):
        links = [name for name in subfolders if Path(folder, name).is_symlink()]
        names += [Path(folder, name).relative_to(out).as_posix() for name in [*files, *links]]
    return names


def _temporary(name: str) -> bool:
    return is_temporary(Path(name).name)
