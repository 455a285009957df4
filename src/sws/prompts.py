"""Prompt templates: one Markdown file per role, with the placeholders it uses declared in a front-matter header.

A template looks like

    ---
    role: extractor
    placeholders: [category, problem, k]
    ---
    ... {{problem}} ...

An optional header field `stop: [...]` lists strings that end the model's reply (sent to every engine as the
requests' stop sequences). Placeholders are `{{name}}` so that single braces (LaTeX such as `\\boxed{}`) stay literal. Loading fails when
the declared placeholders and the ones the body uses differ; rendering fails when a value is missing or when a
value is given that the template does not use, so a prompt can never silently drop its problem text.
The shipped templates live in the package (`sws/prompts_data/`); a world may replace any of them with a file of
the same name in its `World.prompt_dir`, and `synthesize.prompt_dir` points at a folder of replacements that wins
over both.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from sws import safe_yaml
from sws.errors import UserError
from sws.world import get_world

TEMPLATE_NAMES = ("extract", "generate", "rate", "label", "categorize")
PLACEHOLDER = re.compile(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}")
FRONT_MATTER = re.compile(r"\A---\n(?P<header>.*?)\n---\n(?P<body>.*)\Z", re.DOTALL)


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    source: str
    placeholders: frozenset[str]
    body: str
    # Strings that end the model's reply (header field `stop`), sent with every request of this template.
    stop: tuple[str, ...] = ()

    @property
    def digest(self) -> str:
        """Hash of the template text and its stop strings, so a stage's manifest goes stale when either changes."""
        text = self.body if not self.stop else self.body + "\x1f" + "\x1f".join(self.stop)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def render(self, values: Mapping[str, Any]) -> str:
        missing = sorted(self.placeholders - values.keys())
        if missing:
            raise UserError(
                f"{self.source}: placeholder '{missing[0]}' has no value (this step supplies "
                f"{', '.join(sorted(values)) or 'nothing'}); remove it from the template"
            )
        unused = sorted(values.keys() - self.placeholders)
        if unused:
            raise UserError(
                f"{self.source}: the template does not use '{unused[0]}'; add {{{{{unused[0]}}}}} to it and to "
                "its 'placeholders' list"
            )
        return PLACEHOLDER.sub(lambda match: str(values[match.group(1)]), self.body).strip() + "\n"


def template_text(name: str, prompt_dir: str | Path | None = None, world: str | None = None) -> tuple[str, str]:
    """(text, source) of template `name`: from `prompt_dir` when given, else from world `world`'s prompt folder
    when it has the file, else the copy shipped in the package."""
    if name not in TEMPLATE_NAMES:
        raise ValueError(f"unknown prompt template {name!r}; known: {', '.join(TEMPLATE_NAMES)}")
    if prompt_dir is not None:
        path = Path(prompt_dir) / f"{name}.md"
        if not path.is_file():
            raise UserError(f"{path}: prompt template not found; add it or unset synthesize.prompt_dir")
        return path.read_text(), str(path)
    world_dir = get_world(world).prompt_dir if world is not None else None
    if world_dir is not None and (Path(world_dir) / f"{name}.md").is_file():
        path = Path(world_dir) / f"{name}.md"
        return path.read_text(), str(path)
    shipped = resources.files("sws") / "prompts_data" / f"{name}.md"
    return shipped.read_text(), str(shipped)


def parse_template(name: str, text: str, source: str) -> PromptTemplate:
    match = FRONT_MATTER.match(text)
    if match is None:
        raise UserError(f"{source}: missing the '---' header that declares 'placeholders: [...]'")
    header = safe_yaml.load(match.group("header"), source) or {}
    declared = header.get("placeholders") if isinstance(header, dict) else None
    if not isinstance(declared, list) or not all(isinstance(item, str) for item in declared):
        raise UserError(f"{source}: header field 'placeholders' must be a list of names, e.g. [problem]")
    body = match.group("body")
    used = set(PLACEHOLDER.findall(body))
    undeclared = sorted(used - set(declared))
    if undeclared:
        raise UserError(f"{source}: the body uses {{{{{undeclared[0]}}}}}; add it to 'placeholders'")
    unused = sorted(set(declared) - used)
    if unused:
        raise UserError(f"{source}: 'placeholders' declares '{unused[0]}' but the body never uses it")
    stop = header.get("stop", [])
    if not isinstance(stop, list) or not all(isinstance(item, str) and item for item in stop):
        raise UserError(f"{source}: header field 'stop' must be a list of non-empty strings, e.g. [\"### Solution\"]")
    return PromptTemplate(name=name, source=source, placeholders=frozenset(declared), body=body, stop=tuple(stop))


def load_template(name: str, prompt_dir: str | Path | None = None, world: str | None = None) -> PromptTemplate:
    """Template `name` as `template_text` finds it (the user's `prompt_dir`, world `world`'s, the shipped one)."""
    text, source = template_text(name, prompt_dir, world)
    return parse_template(name, text, source)


def chat(text: str) -> tuple[dict[str, str], ...]:
    """A rendered prompt as the one user message a chat engine receives."""
    return ({"role": "user", "content": text},)
