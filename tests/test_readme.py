"""The README is a short portal whose commands, pipeline snippets and links all work as written, and the docs it
leads to link only to what exists."""

import re
import shlex
from pathlib import Path

import pytest
import typer
import yaml

from sws import preflight
from sws.cli import app
from sws.config import parse_config
from sws.stage import synthesis_steps

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
DOCS = sorted((REPO / "docs").rglob("*.md"))
MAX_BYTES = 10_000
ROOT_COMMAND = typer.main.get_command(app)


def fenced_blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def shell_commands(text: str) -> list[str]:
    """Every `sws ...` or `make ...` command of the README's bash blocks and inline code, one per string."""
    lines = []
    for block in fenced_blocks(text, "bash"):
        lines += block.replace("\\\n", " ").splitlines()
    lines += re.findall(r"`((?:sws|make) [^`]+)`", text)
    commands = []
    for line in lines:
        for part in re.split(r"&&|;", line.split(" #")[0]):
            words = shlex.split(part.strip().rstrip("&"))
            while words and re.fullmatch(r"[A-Z_]+=\S*", words[0]):  # VAR=value before a command
                words = words[1:]
            if words and words[0] in ("sws", "make"):
                commands.append(shlex.join(words))
    return commands


def make_targets() -> set[str]:
    return set(re.findall(r"^([A-Za-z][\w-]*):", (REPO / "Makefile").read_text(), flags=re.MULTILINE))


def parse_sws(args: list[str]) -> None:
    """Parse a command line as `sws` would, without running it: unknown commands and options, missing required
    ones and values of the wrong type raise."""
    command, path = ROOT_COMMAND, ["sws"]
    while hasattr(command, "commands") and args and not args[0].startswith("-"):
        assert args[0] in command.commands, f"{' '.join(path)} has no command {args[0]!r}"
        command, path, args = command.commands[args[0]], [*path, args[0]], args[1:]
    if args and args[0] in ("--help", "--version"):
        return
    command.make_context(" ".join(path), list(args))


def test_the_readme_is_at_most_10_kb() -> None:
    assert README.stat().st_size <= MAX_BYTES


COMMANDS = list(dict.fromkeys(shell_commands(README.read_text())))


def test_the_readme_shows_the_two_commands_and_a_run_by_preset_name() -> None:
    assert {"make demo", "make test", "sws --version"} <= set(COMMANDS)
    assert any(command.startswith("sws run demo ") for command in COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_in_the_readme_is_a_real_command(command: str) -> None:
    program, *args = shlex.split(command)
    if program == "make":
        targets = [arg for arg in args if "=" not in arg]
        assert set(targets) <= make_targets(), f"{command}: no such Makefile target"
    else:
        parse_sws(args)


def test_a_command_that_is_not_real_is_caught() -> None:
    with pytest.raises(Exception, match="no-such-option"):
        parse_sws(["run", "demo", "--run", "runs/demo", "--no-such-option"])
    with pytest.raises(AssertionError, match="no command"):
        parse_sws(["no-such-command", "--run", "runs/demo"])


@pytest.mark.parametrize("block", fenced_blocks(README.read_text(), "yaml"))
def test_every_pipeline_snippet_in_the_readme_passes_synthesis_checks(block: str, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "EMPTY")  # as the README exports it
    cfg = parse_config(yaml.safe_load(block), "README.md")
    preflight.check(cfg, "synthesize", "README.md", synthesis_steps())


def anchors(page: Path) -> set[str]:
    """GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces as hyphens."""
    headings = re.findall(r"^#+ (.+)$", page.read_text(), flags=re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-") for heading in headings}


@pytest.mark.parametrize("page", [README, *DOCS], ids=lambda page: str(page.relative_to(REPO)))
def test_every_local_link_leads_to_a_file_and_heading_that_exist(page: Path) -> None:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.MULTILINE | re.DOTALL)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: {target} does not exist"
        if anchor:
            assert anchor in anchors(linked), f"{page.name}: {target} names no heading"
