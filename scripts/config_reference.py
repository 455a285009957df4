"""Write docs/configuration.md, the reference of every pipeline setting, from the pydantic models in sws.config.

Run: `make docs` (or `python scripts/config_reference.py [FILE]`); `--check` exits 1 when the file is stale.
A field's description is its `Field(description=...)`, else the comment lines right above it in the model's source;
a section's is its class docstring.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
import types
import typing
from pathlib import Path

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from sws.config import PipelineConfig

TARGET = Path(__file__).resolve().parents[1] / "docs" / "configuration.md"
HEADER = """# Configuration reference

Every setting of a pipeline file (`sws run PIPELINE.yaml`), by section, with its type, its default and what it
does. Generated from the pydantic models in `src/sws/config.py` by `make docs`; a test fails when it is stale. A
world adds its own section (`arith:` for the arith world), validated by the world's model. The shipped presets
are in [presets.md](presets.md).
"""


def field_comments(model: type[BaseModel]) -> dict[str, str]:
    """The comment lines right above each field in the model's class body, joined."""
    lines = textwrap.dedent(inspect.getsource(model)).splitlines()
    comments: dict[str, str] = {}
    for node in ast.parse("\n".join(lines)).body[0].body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            above: list[str] = []
            row = node.lineno - 2
            while row >= 0 and lines[row].strip().startswith("#"):
                above.insert(0, lines[row].strip().lstrip("#").strip())
                row -= 1
            comments[node.target.id] = " ".join(above)
    return comments


def type_name(annotation: object) -> str:
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        return " \\| ".join(repr(arg) for arg in typing.get_args(annotation))
    if origin in (typing.Union, types.UnionType):
        return " \\| ".join(type_name(arg) for arg in typing.get_args(annotation))
    if origin is typing.Annotated:
        return type_name(typing.get_args(annotation)[0])
    if origin is not None:
        args = ", ".join(type_name(arg) for arg in typing.get_args(annotation) if arg is not Ellipsis)
        return f"{getattr(origin, '__name__', str(origin))}[{args}]"
    if annotation is type(None):
        return "None"
    return getattr(annotation, "__name__", str(annotation)).replace("SerializeAsAny", "section")


def default_text(info: FieldInfo) -> str:
    if info.default is PydanticUndefined and info.default_factory is None:
        return "required"
    value = info.default_factory() if info.default_factory is not None else info.default
    if isinstance(value, BaseModel):
        return "see below"
    return f"`{value!r}`" if not isinstance(value, str) else f'`"{value}"`'


def sub_model(annotation: object) -> type[BaseModel] | None:
    """The section model a field holds (directly, or as `Model | None`), if any."""
    candidates = [annotation, *typing.get_args(annotation)]
    return next((each for each in candidates if isinstance(each, type) and issubclass(each, BaseModel)
                 and each is not BaseModel and "Section" != each.__name__), None)


def anchor(dotted: str) -> str:
    return dotted.replace(".", "")


def section_rows(model: type[BaseModel], prefix: str, sections: list[tuple[str, type[BaseModel]]]) -> list[str]:
    """The model's table; each section model it holds joins `sections` under its first path (an engine's
    settings, say, are described once, under `roles.extractor`, and linked from every other role)."""
    comments = field_comments(model)
    rows = ["| field | type | default | description |", "|---|---|---|---|"]
    for name, info in model.model_fields.items():
        nested = sub_model(info.annotation)
        description = (info.description or comments.get(name, "")).replace("|", "\\|")
        if nested is not None:
            first = next((path for path, each in sections if each is nested), None)
            if first is None:
                first = f"{prefix}{name}"
                sections.append((first, nested))
            description = (description + f" Its fields: [`{first}`](#{anchor(first)}).").strip()
        rows.append(f"| `{name}` | {type_name(info.annotation)} | {default_text(info)} | {description} |")
    return rows


def reference() -> str:
    parts = [HEADER]
    sections: list[tuple[str, type[BaseModel]]] = [("", PipelineConfig)]
    index = 0
    while index < len(sections):
        dotted, model = sections[index]
        index += 1
        title = f"`{dotted}`" if dotted else "Top level"
        doc = " ".join((model.__dict__.get("__doc__") or "").split())
        parts.append(f"## {title}\n\n{doc}\n\n" + "\n".join(section_rows(model, f"{dotted}." if dotted else "",
                                                                          sections)) + "\n")
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    files = [Path(arg) for arg in argv if arg != "--check"]
    target = files[0] if files else TARGET
    text = reference()
    if "--check" in argv:
        if not target.is_file() or target.read_text() != text:
            print(f"{target}: stale; regenerate it with `make docs`", file=sys.stderr)
            return 1
        return 0
    target.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
