"""Generator yield and tokens per kept problem on recorded real-model outputs, before and after stopping the
generator where its problem ends.

Replays the generator replies of a recording (`role: generator` lines of a teacher_outputs JSONL file) through
generate's screening (`screen_generation`, pre-filters included) three ways:
- before: the old rule, every reply cut off at max_tokens rejected as `truncated`, no stop strings;
- truncation judged on the problem: a reply cut off after its problem ended keeps the problem;
- and the generate template's stop strings: each reply ends before the first of them, as a server would end
  it (finish_reason stop), and its completion tokens are the recorded count scaled by the share of text kept
  (an estimate: the recording has no per-character token counts).

    PYTHONPATH=src .venv/bin/python bench/generator_stop.py [FILE ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from sws.engines.base import FINISHED, Completion, cut_at_stop
from sws.prompts import load_template
from sws.stages.generate import screen_generation

RECORDINGS = (Path(__file__).parents[1] / "tests" / "fixtures" / "teacher_outputs" / "qwen2.5-coder-1.5b-instruct.jsonl",
              Path(__file__).parents[2] / "shared" / "data" / "teacher_outputs" / "qwen2.5-coder-1.5b-instruct.jsonl")
MIN_CHARS, MAX_PROBLEM_TOKENS = 10, 400  # synthesize.min_problem_chars, synthesize.max_problem_tokens defaults


def recorded(row: dict) -> Completion:
    return Completion(row["output"], row["completion_tokens"], row["finish_reason"])


def stopped(row: dict, stop: tuple[str, ...]) -> Completion:
    text = cut_at_stop(row["output"], stop)
    if text is None:
        return recorded(row)
    return Completion(text, round(row["completion_tokens"] * len(text) / len(row["output"])), FINISHED)


def old_reason(completion: Completion) -> str | None:
    return "truncated" if completion.truncated else screen_generation(completion, MIN_CHARS, MAX_PROBLEM_TOKENS)[1]


def new_reason(completion: Completion) -> str | None:
    return screen_generation(completion, MIN_CHARS, MAX_PROBLEM_TOKENS)[1]


def line(name: str, completions: list[Completion], reasons: list[str | None]) -> str:
    kept = sum(reason is None for reason in reasons)
    tokens = sum(completion.tokens for completion in completions)
    truncated = sum(reason == "truncated" for reason in reasons)
    per_kept = f"{tokens / kept:7.0f}" if kept else "      -"
    return (f"  {name:<44} kept {kept:2d}/{len(reasons)}  truncated {truncated:2d}  completion tokens {tokens:5d}  "
            f"per kept problem {per_kept}")


def measure(path: Path, stop: tuple[str, ...]) -> None:
    rows = [json.loads(text) for text in path.read_text().splitlines() if text]
    replies = [row for row in rows if row["role"] == "generator"]
    plain = [recorded(row) for row in replies]
    cut = [stopped(row, stop) for row in replies]
    print(f"{path} ({len(replies)} generator replies, {sum(c.truncated for c in plain)} cut off at max_tokens):")
    print(line("before (cut-off replies rejected)", plain, [old_reason(c) for c in plain]))
    print(line("truncation judged on the problem", plain, [new_reason(c) for c in plain]))
    print(line("+ stop strings of the generate template", cut, [new_reason(c) for c in cut]))


def main() -> None:
    stop = load_template("generate").stop
    print(f"generate template stop strings: {list(stop)}")
    for path in [Path(arg) for arg in sys.argv[1:]] or [path for path in RECORDINGS if path.exists()]:
        measure(path, stop)


if __name__ == "__main__":
    main()
