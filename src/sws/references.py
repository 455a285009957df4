"""Module-level objects named as `module:qualified.name`, for processes that rebuild them by importing (verl's
reward module, the workers of a TRL run on several GPUs). Only the standard library is imported."""

from __future__ import annotations

import importlib
from typing import Any


def load(name: str) -> Any:
    """The object `name` (`module:qualified.name`) names, its module imported."""
    module, _, qualname = name.partition(":")
    found: Any = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


def name_of(obj: Any) -> str:
    """The name `load` finds `obj` by; ValueError when importing its module does not give it back (a lambda, a
    function defined inside another, one of the main script)."""
    name = f"{getattr(obj, '__module__', '')}:{getattr(obj, '__qualname__', '')}"
    try:
        found = load(name) if "<" not in name and not name.startswith("__main__:") else None
    except (ImportError, AttributeError, ValueError):
        found = None
    if found is not obj:
        raise ValueError(f"{obj!r} is not a module-level function or class, which another process can import")
    return name
