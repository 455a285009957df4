"""No `UserError` message starts with `error:`: the CLI writes that prefix itself, so such a message was
printed as `error: error: ...`. Walks every `UserError(...)` call in the package's source; the hostile-server
and setting tests read the printed line itself (tests/cotrain/test_tinker_hostile.py)."""

import ast
from pathlib import Path

import sws

SOURCE = Path(sws.__file__).parent


def leading_text(node: ast.expr) -> str | None:
    """The literal start of a message expression: a string, an f-string's first part, the left of a `+`, the
    first argument of a call wrapping the message (`redact(...)`); None where it starts with a value."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values:
        return leading_text(node.values[0])
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return leading_text(node.left)
    if isinstance(node, ast.Call) and node.args:
        return leading_text(node.args[0])
    return None


def user_error_messages() -> dict[str, str]:
    """`file:line` -> the literal start of each UserError's message."""
    messages = {}
    for path in sorted(SOURCE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "UserError":
                text = leading_text(node.args[0]) if node.args else None
                if text is not None:
                    messages[f"{path.relative_to(SOURCE)}:{node.lineno}"] = text
    return messages


def test_no_user_error_message_starts_with_the_prefix_the_cli_adds() -> None:
    messages = user_error_messages()
    assert len(messages) > 50  # the walk finds the package's messages
    prefixed = {where: text for where, text in messages.items() if text.lstrip().lower().startswith("error:")}
    assert prefixed == {}
