"""The report's HTML building blocks: a titled section, a paragraph, a table, an embedded PNG. The report and
the sections other packages add to it (co-training's) build their pages from these."""

from __future__ import annotations

import base64
import html
from dataclasses import dataclass

import polars as pl


@dataclass
class Section:
    title: str
    body: str


def embedded(png: bytes, name: str) -> str:
    encoded = base64.b64encode(png).decode("ascii")
    return f'<img alt="{html.escape(name)}" src="data:image/png;base64,{encoded}">'


def paragraph(text: str, css_class: str = "") -> str:
    attribute = f' class="{css_class}"' if css_class else ""
    return f"<p{attribute}>{html.escape(text)}</p>"


def cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3f}"
    return html.escape("–" if value is None else str(value))


def html_table(df: pl.DataFrame) -> str:
    head = "".join(f"<th>{html.escape(column)}</th>" for column in df.columns)
    rows = "".join("<tr>" + "".join(f"<td>{cell(value)}</td>" for value in row) + "</tr>"
                   for row in df.iter_rows())
    return f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>"
