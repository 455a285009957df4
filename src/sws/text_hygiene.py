"""Characters no problem, answer or concept should hold: what a model writes reaches the training set, the
verl export and every terminal that prints it.

Control characters other than newline and tab (NUL, bell, the escape that starts an ANSI sequence, the C1
range) and the Unicode controls that reorder text on screen (right-to-left overrides and isolates, which can
make a problem display as something else than it says) carry no mathematics. A text holding one is rejected
with `REJECT_REASON` rather than cleaned: what a model meant around such a character cannot be known.
"""

from __future__ import annotations

import re

REJECT_REASON = "control_characters"
_HOSTILE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def hostile_character(text: str | None) -> str | None:
    """The first control or bidi character in `text` as U+XXXX, or None when it has none."""
    found = _HOSTILE.search(text or "")
    return None if found is None else f"U+{ord(found.group()):04X}"


def any_hostile(texts: list[str]) -> bool:
    return any(hostile_character(text) for text in texts)


# Markup a model may put in free text that a page shows (a categorizer's summary): script and style blocks with
# their content, and the tags of HTML elements: named elements, attributes only as name=value, so that
# "a<b and c>d" stays as it is.
_SCRIPT_BLOCK = re.compile(r"<(script|style)\b[^>]*>.*?(?:</\1\s*>|$)", re.I | re.S)
_TAG = re.compile(r"</?(?:a|b|i|u|p|br|hr|em|strong|span|div|img|svg|iframe|object|embed|link|meta|form|input|button|"
                  r"script|style|html|head|body|title|table|tr|td|th|ul|ol|li|h[1-6]|pre|code|sup|sub|font)"
                  r"""(?:\s+[\w:-]+\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'<>]+))*\s*/?>""", re.I)


def plain_text(text: str) -> str:
    """`text` without control or bidi characters and without markup, for free text kept as it is (not rejected)."""
    return _HOSTILE.sub("", _TAG.sub("", _SCRIPT_BLOCK.sub("", text)))
