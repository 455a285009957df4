"""Answer extraction and math-verify equivalence, run in spawned worker processes with a hard deadline per pair.

math-verify turns LaTeX into SymPy, and SymPy can run for ever on hostile input (`9^{9^{9^{9}}}`) inside C code
that no signal interrupts; its own timeout also relies on `signal.alarm`, which only works in a main thread.
So every comparison runs in a worker process of a `GradingPool`: a pair that misses its deadline (or whose
worker dies) is left ungraded, and its worker is killed and replaced. A verdict is True (equivalent), False (not
shown equivalent, or no prediction) or None (ungraded): a comparison that ran out of time says nothing about the
answer, so callers leave it out of their counts rather than count it wrong. Two cheap cases skip math-verify:
identical normalised spellings are equivalent, and two plain integers are compared as integers in the calling
process.

Answers are strings as `extract_answer` returns them (not whole model outputs); a gold answer or prediction
without math delimiters is wrapped in `$…$` before parsing, since math-verify finds nothing in bare LaTeX.
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import os
import re
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

DEFAULT_DEADLINE_S = 5.0
WORKER_START_TIMEOUT_S = 120.0
_READY = "ready"

# True: equivalent; False: not shown equivalent (or no prediction); None: ungraded (deadline passed, worker died).
Verdict = bool | None

# ---------------------------------------------------------------- extraction

_UNESCAPED_DOLLAR = re.compile(r"(?<!\\)\$")
_DOLLAR_DELIMITED = re.compile(r"\$+(?P<inner>.*?)(?<!\\)\$+", re.DOTALL)


def _without_dollar_delimiters(text: str) -> str:
    delimited = _DOLLAR_DELIMITED.fullmatch(text)
    return delimited.group("inner") if delimited else text


_BOX_COMMAND = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_BARE_BOX_ARGUMENT = re.compile(r"\s+([^\s$]+)")
# Fallbacks when no box is present, in this order: "… answer is X" / "Answer: X" / "answer = X" (the last such
# phrase in the text), then GSM8K's "#### X". X runs to the end of its line.
_ANSWER_PHRASE = re.compile(r"\banswer\s*(?:is\b|:|=)", re.IGNORECASE)
_GSM8K_MARKER = re.compile(r"####")


def extract_answer(text: str) -> str | None:
    """The final answer stated in a model output, or None when it states none.

    The argument of the last `\\boxed{…}` or `\\fbox{…}` (nested braces; `\\boxed 5` also works). A last box
    left unclosed (a truncated output) gives None. Without any box, the fallbacks are the last "the answer is X"
    (also "Answer: X", "final answer = X"), then the last GSM8K-style "#### X". Surrounding `$` and trailing
    punctuation are stripped.
    """
    if not text:
        return None
    boxes = list(_BOX_COMMAND.finditer(text))
    if boxes:
        return _clean(_box_argument(text, boxes[-1].end()))
    for pattern in (_ANSWER_PHRASE, _GSM8K_MARKER):
        matches = list(pattern.finditer(text))
        if matches:
            return _clean(text[matches[-1].end() :].split("\n", 1)[0])
    return None


def _box_argument(text: str, start: int) -> str | None:
    """The argument of a box command ending at `start`: a balanced `{…}` group or a bare token."""
    position = start
    while position < len(text) and text[position] == " ":
        position += 1
    if position < len(text) and text[position] == "{":
        return _braced_group(text, position)
    bare = _BARE_BOX_ARGUMENT.match(text, start)
    return bare.group(1) if bare else None


def _braced_group(text: str, open_at: int) -> str | None:
    """Contents of the brace group opening at `open_at`, skipping escaped `\\{` `\\}`; None if never closed."""
    depth = 0
    position = open_at
    while position < len(text):
        char = text[position]
        if char == "\\":
            position += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : position]
        position += 1
    return None


def _clean(answer: str | None) -> str | None:
    if answer is None:
        return None
    return _without_dollar_delimiters(answer.strip().rstrip(".,;").strip()).strip() or None


# ---------------------------------------------------------------- equivalence


def normalize_answer(answer: str) -> str:
    """The spelling used for the fast path and for grouping: no whitespace, no surrounding `$…$`."""
    return _without_dollar_delimiters(re.sub(r"\s+", "", answer))


_PLAIN_INTEGER = re.compile(r"(?P<sign>[+-]?)0*(?P<digits>\d+)")


def _integer_spelling(answer: str) -> str | None:
    """One spelling per integer (`+007` -> `7`, `-0` -> `0`) for plain integers, else None.

    Compared as text, so a 10,000-digit answer costs no int conversion (which Python limits to 4,300 digits).
    """
    match = _PLAIN_INTEGER.fullmatch(normalize_answer(answer))
    if match is None:
        return None
    digits = match.group("digits").lstrip("0") or "0"
    return f"-{digits}" if match.group("sign") == "-" and digits != "0" else digits


def _as_math(answer: str) -> str:
    """The answer with math delimiters, which math-verify needs to find LaTeX (`\\$` is a dollar sign, not one)."""
    if _UNESCAPED_DOLLAR.search(answer) or "\\boxed" in answer or "\\(" in answer or "\\[" in answer:
        return answer
    return f"${answer}$"


def _math_verify_equivalent(gold: str, pred: str, step_timeout_s: int) -> bool:
    """What a worker runs: math-verify parse of both sides, then verify with gold first."""
    from math_verify import parse, verify

    gold_parsed = parse(_as_math(gold), parsing_timeout=step_timeout_s)
    pred_parsed = parse(_as_math(pred), parsing_timeout=step_timeout_s)
    if not gold_parsed or not pred_parsed:
        return False
    return bool(verify(gold_parsed, pred_parsed, timeout_seconds=step_timeout_s))


def _worker_main(connection: Connection, step_timeout_s: int) -> None:
    # The parent owns interruption: Ctrl-C kills workers through the pool, not with a traceback from each.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # math-verify logs every timeout with the whole input; the pool counts timeouts instead.
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    # Warm up imports and parser tables before announcing readiness, so deadlines measure grading only.
    _math_verify_equivalent("x^2+\\frac{1}{2}", "0.5+x^2", step_timeout_s)
    try:
        connection.send(_READY)
        while True:
            gold, pred = connection.recv()
            try:
                verdict = _math_verify_equivalent(gold, pred, step_timeout_s)
            except Exception:  # math-verify or SymPy choking on an answer means "not shown equivalent"
                verdict = False
            connection.send(verdict)
    except (EOFError, OSError):  # the parent closed its end; a reset when it never read our last message
        return


@dataclass
class _Worker:
    process: Any
    connection: Connection
    ready: bool = False
    # Pairs sent and not yet answered, oldest first; the worker is running the oldest.
    in_flight: deque[int] = field(default_factory=deque)
    # For a ready worker, when its oldest in-flight pair runs out of time; before that, when start-up does.
    deadline: float = 0.0


class GradingPool:
    """Spawned worker processes that grade (gold, pred) pairs, each within `deadline_s` of wall-clock time."""

    # Each worker gets its next pair before it finishes the current one, so it never waits for the parent. Only
    # short pairs are sent ahead: a long one could fill the pipe and block the parent while a deadline runs out.
    PAIRS_IN_FLIGHT = 2
    SEND_AHEAD_MAX_CHARS = 4096

    def __init__(self, workers: int | None = None, deadline_s: float = DEFAULT_DEADLINE_S) -> None:
        workers = default_workers() if workers is None else workers
        if workers < 1 or deadline_s <= 0:
            raise ValueError("a GradingPool needs at least one worker and a positive deadline")
        self.n_workers = workers
        self.deadline_s = deadline_s
        # math-verify's own signal timeouts end most slow comparisons gracefully; the kill is the backstop.
        self._step_timeout_s = max(1, int(deadline_s // 2))
        self._context = multiprocessing.get_context("spawn")
        self._workers: list[_Worker] = []
        self._lock = threading.Lock()
        self.timeouts = 0

    def grade(self, pairs: list[tuple[str, str | None]]) -> list[Verdict]:
        """For each (gold, pred) pair, whether pred is equivalent to gold: a missing pred is False, a pair past its
        deadline (or whose worker died) None."""
        with self._lock:
            verdicts: list[Verdict] = [None] * len(pairs)
            pending: deque[int] = deque()
            for index, (gold, pred) in enumerate(pairs):
                if pred is None or not normalize_answer(pred) or not normalize_answer(gold):
                    verdicts[index] = False
                elif normalize_answer(gold) == normalize_answer(pred):
                    verdicts[index] = True
                elif (gold_integer := _integer_spelling(gold)) is not None and (
                    pred_integer := _integer_spelling(pred)
                ) is not None:
                    verdicts[index] = gold_integer == pred_integer
                else:
                    pending.append(index)
            if pending:
                try:
                    self._run(pairs, pending, verdicts)
                except BaseException:  # e.g. Ctrl-C: unanswered pairs would be read as answers to the next call
                    self._stop_all()
                    raise
            return verdicts

    def _run(self, pairs: list[tuple[str, str | None]], pending: deque[int], verdicts: list[Verdict]) -> None:
        while len(self._workers) < self.n_workers:
            self._workers.append(self._start_worker())
        outstanding = len(pending)
        while outstanding:
            for slot in range(len(self._workers)):
                self._feed(slot, pairs, pending)
            waiting = [worker for worker in self._workers if not worker.ready or worker.in_flight]
            wake_at = min(worker.deadline for worker in waiting)
            readable = wait([worker.connection for worker in waiting], max(0.0, wake_at - time.monotonic()))
            now = time.monotonic()
            for slot, worker in enumerate(self._workers):
                if worker.connection in readable:
                    try:
                        message = worker.connection.recv()
                    except EOFError:  # the worker died (e.g. out of memory)
                        if not worker.ready:
                            raise RuntimeError(
                                "a grading worker exited during start-up; a script that grades must start from "
                                "`if __name__ == '__main__':` (spawned workers import the main module)"
                            ) from None
                        outstanding -= self._give_up_oldest(slot, pending)
                        continue
                    if message == _READY:
                        worker.ready = True
                        continue
                    verdicts[worker.in_flight.popleft()] = message
                    outstanding -= 1
                    worker.deadline = now + self.deadline_s  # the next in-flight pair started at the latest now
                elif not worker.ready and now > worker.deadline:
                    raise RuntimeError(f"a grading worker did not start within {WORKER_START_TIMEOUT_S:.0f} s")
                elif worker.in_flight and now > worker.deadline:
                    self.timeouts += 1
                    outstanding -= self._give_up_oldest(slot, pending)

    def _feed(self, slot: int, pairs: list[tuple[str, str | None]], pending: deque[int]) -> None:
        """Send pending pairs to a ready worker until it has PAIRS_IN_FLIGHT (or one long pair)."""
        worker = self._workers[slot]
        while worker.ready and pending and len(worker.in_flight) < self.PAIRS_IN_FLIGHT:
            gold, pred = pairs[pending[0]]
            if worker.in_flight and len(gold) + len(pred or "") > self.SEND_AHEAD_MAX_CHARS:
                return
            try:
                worker.connection.send((gold, pred))
            except OSError:  # it died while idle; with pairs in flight, its end-of-file is handled in _run
                if not worker.in_flight:
                    self._stop(worker)
                    self._workers[slot] = self._start_worker()
                return
            if not worker.in_flight:
                worker.deadline = time.monotonic() + self.deadline_s
            worker.in_flight.append(pending.popleft())

    def _give_up_oldest(self, slot: int, pending: deque[int]) -> int:
        """Leave the worker's current pair ungraded (its verdict stays None), requeue the pairs it had not
        started, and replace the worker."""
        worker = self._workers[slot]
        worker.in_flight.popleft()
        pending.extendleft(reversed(worker.in_flight))
        worker.in_flight.clear()
        worker.process.kill()
        self._stop(worker)
        self._workers[slot] = self._start_worker()
        return 1

    def _start_worker(self) -> _Worker:
        parent_end, child_end = self._context.Pipe()
        process = self._context.Process(target=_worker_main, args=(child_end, self._step_timeout_s), daemon=True)
        process.start()
        child_end.close()
        return _Worker(process, parent_end, deadline=time.monotonic() + WORKER_START_TIMEOUT_S)

    @staticmethod
    def _stop(worker: _Worker) -> None:
        worker.connection.close()
        if worker.in_flight:
            worker.process.kill()
        worker.process.join(timeout=1)
        if worker.process.is_alive():
            worker.process.kill()
            worker.process.join()

    def _stop_all(self) -> None:
        for worker in self._workers:
            self._stop(worker)
        self._workers = []

    def close(self) -> None:
        with self._lock:
            self._stop_all()

    def __enter__(self) -> GradingPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---------------------------------------------------------------- module-level API on a shared pool

_shared_pool: GradingPool | None = None


def default_workers() -> int:
    """One grading process per CPU of this machine."""
    return os.cpu_count() or 1


def shared_pool(workers: int | None = None, deadline_s: float = DEFAULT_DEADLINE_S) -> GradingPool:
    """The pool behind the module-level functions: `workers` processes (None: one per CPU), started on first use.

    Asked for another size or deadline, it is replaced by one of that size (`grading.workers` of a pipeline).
    """
    global _shared_pool
    workers = default_workers() if workers is None else workers
    if _shared_pool is not None and (_shared_pool.n_workers, _shared_pool.deadline_s) != (workers, deadline_s):
        close_pool()
    if _shared_pool is None:
        _shared_pool = GradingPool(workers, deadline_s)
    return _shared_pool


def close_pool() -> None:
    """Shut down the shared pool's workers (a later call starts new ones)."""
    global _shared_pool
    if _shared_pool is not None:
        _shared_pool.close()
        _shared_pool = None


atexit.register(close_pool)


def grade_many(pairs: list[tuple[str, str | None]], pool: GradingPool | None = None) -> list[Verdict]:
    """Grade (gold, pred) pairs in parallel; a pair past its deadline is None (ungraded)."""
    return (pool or shared_pool()).grade(pairs)


def equivalent(gold: str, pred: str | None, pool: GradingPool | None = None) -> bool:
    """Whether `pred` is known to state the same answer as `gold` (math-verify, gold first); an ungraded
    comparison is not."""
    return grade_many([(gold, pred)], pool)[0] is True


def graded_count(verdicts: Sequence[Verdict]) -> tuple[int, int]:
    """(graded, correct) of a problem's samples; ungraded verdicts count in neither, so correct / graded is the
    accuracy over what could be graded."""
    return sum(verdict is not None for verdict in verdicts), sum(verdict is True for verdict in verdicts)


@dataclass
class AnswerGroup:
    """Answers equivalent to `answer` (the group's most frequent spelling); `members` index the input list."""

    answer: str
    members: list[int]


def group_answers(answers: list[str | None], pool: GradingPool | None = None) -> list[AnswerGroup]:
    """Equivalence classes of answers for majority voting, largest first; None or blank answers join no group.

    Spellings are taken most frequent first; each unassigned spelling founds a group and every remaining
    spelling equivalent to it (founder as gold) joins, so a group's answer is its most common spelling. An
    ungraded comparison is not known equal: that spelling stays out of the group and founds or joins another.
    """
    members_by_spelling: dict[str, list[int]] = {}
    for index, answer in enumerate(answers):
        if answer is not None and normalize_answer(answer):
            members_by_spelling.setdefault(normalize_answer(answer), []).append(index)
    remaining = sorted(members_by_spelling.values(), key=len, reverse=True)
    groups: list[AnswerGroup] = []
    while remaining:
        founder, *others = remaining
        founder_answer = str(answers[founder[0]])
        joins = grade_many([(founder_answer, answers[members[0]]) for members in others], pool)
        joined = [index for members, join in zip(others, joins, strict=True) if join is True for index in members]
        groups.append(AnswerGroup(founder_answer, sorted(founder + joined)))
        remaining = [members for members, join in zip(others, joins, strict=True) if join is not True]
    groups.sort(key=lambda group: len(group.members), reverse=True)
    return groups


def grade_completions(
    answers: Sequence[str], completions: Sequence[str], pool: GradingPool | None = None
) -> list[Verdict]:
    """For each (reference answer, model output) pair, whether the output's final answer is equivalent: False
    when it states none, None when its grading ran out of time."""
    return grade_many([(answer, extract_answer(text)) for answer, text in zip(answers, completions, strict=True)],
                      pool)


# A grading body, as executors run it: a batch of JSON-like items and the pool that grades them, to one result
# per item.
GradedFn = Callable[[list[Any], GradingPool], list[Any]]


def grade_answer_pairs(pairs: list[Sequence[str]], pool: GradingPool) -> list[Verdict]:
    """The math answer check, as a grading body: `grade_completions` over (answer, output) pairs."""
    return grade_completions([answer for answer, _ in pairs], [output for _, output in pairs], pool)
