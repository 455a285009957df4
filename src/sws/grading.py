"""Grading with a world's verifier (`sws.verifier`), in spawned worker processes with a hard deadline per pair.

A verifier's comparison may run for ever (math-verify hands LaTeX to SymPy, which can loop inside C code that no
signal interrupts; its own timeout also relies on `signal.alarm`, which only works in a main thread). So every
comparison runs in a worker process of a `GradingPool`: a pair that misses its deadline (or whose worker dies)
is left ungraded, and its worker is killed and replaced. A verdict is True (equivalent), False (not shown
equivalent, or no answer) or None (ungraded): a comparison that ran out of time says nothing about the answer,
so callers leave it out of their counts rather than count it wrong. Answers of the same spelling
(`Verifier.spelling`), and pairs the verifier decides cheaply (`Verifier.quick_verdict`), are graded in the
calling process.

A pool grades with one verifier, sent to its workers by reference; the helpers below take the pool.
Only the standard library is imported: verl's reward module grades where sws's dependencies are not installed.
"""

from __future__ import annotations

import atexit
import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from multiprocessing.connection import Connection, wait
from typing import Any

from sws.verifier import Verifier

DEFAULT_DEADLINE_S = 5.0
WORKER_START_TIMEOUT_S = 120.0
_READY = "ready"

# True: equivalent; False: not shown equivalent (or no prediction); None: ungraded (deadline passed, worker died).
Verdict = bool | None


def _worker_main(connection: Connection, verifier: Verifier, deadline_s: float) -> None:
    # The parent owns interruption: Ctrl-C kills workers through the pool, not with a traceback from each.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Set up before announcing readiness, so deadlines measure grading only.
    verifier = verifier.in_worker(deadline_s)
    try:
        connection.send(_READY)
        while True:
            gold, pred = connection.recv()
            try:
                verdict = verifier.equivalent(gold, pred)
            except Exception:  # a verifier choking on an answer means "not shown equivalent"
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
    """Spawned worker processes that grade (gold, pred) pairs with `verifier`, each within `deadline_s` of
    wall-clock time."""

    # Each worker gets its next pair before it finishes the current one, so it never waits for the parent. Only
    # short pairs are sent ahead: a long one could fill the pipe and block the parent while a deadline runs out.
    PAIRS_IN_FLIGHT = 2
    SEND_AHEAD_MAX_CHARS = 4096

    def __init__(self, verifier: Verifier, workers: int | None = None, deadline_s: float = DEFAULT_DEADLINE_S
                 ) -> None:
        workers = default_workers() if workers is None else workers
        if workers < 1 or deadline_s <= 0:
            raise ValueError("a GradingPool needs at least one worker and a positive deadline")
        self.verifier = verifier
        self.n_workers = workers
        self.deadline_s = deadline_s
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
                verdicts[index] = self._verdict_here(gold, pred)
                if verdicts[index] is None:
                    pending.append(index)
            if pending:
                try:
                    self._run(pairs, pending, verdicts)
                except BaseException:  # e.g. Ctrl-C: unanswered pairs would be read as answers to the next call
                    self._stop_all()
                    raise
            return verdicts

    def _verdict_here(self, gold: str, pred: str | None) -> Verdict:
        """The verdict reached without a worker: False without an answer, True for the same spelling, else the
        verifier's quick verdict (None: a worker must compare them)."""
        if pred is None:
            return False
        gold_spelling, pred_spelling = self.verifier.spelling(gold), self.verifier.spelling(pred)
        if not gold_spelling or not pred_spelling:
            return False
        if gold_spelling == pred_spelling:
            return True
        return self.verifier.quick_verdict(gold, pred)

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
        process = self._context.Process(target=_worker_main, args=(child_end, self.verifier, self.deadline_s),
                                        daemon=True)
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


def shared_pool(verifier: Verifier, workers: int | None = None, deadline_s: float = DEFAULT_DEADLINE_S
                ) -> GradingPool:
    """One pool of this process, grading with `verifier`: `workers` processes (None: one per CPU), started on
    first use.

    Asked for another verifier, size or deadline, it is replaced by one of those (`grading.workers` of a
    pipeline).
    """
    global _shared_pool
    workers = default_workers() if workers is None else workers
    wanted = (verifier, workers, deadline_s)
    if _shared_pool is not None and (_shared_pool.verifier, _shared_pool.n_workers, _shared_pool.deadline_s) != wanted:
        close_pool()
    if _shared_pool is None:
        _shared_pool = GradingPool(verifier, workers, deadline_s)
    return _shared_pool


def close_pool() -> None:
    """Shut down the shared pool's workers (a later call starts new ones)."""
    global _shared_pool
    if _shared_pool is not None:
        _shared_pool.close()
        _shared_pool = None


atexit.register(close_pool)


def grade_many(pairs: list[tuple[str, str | None]], pool: GradingPool) -> list[Verdict]:
    """Grade (gold, pred) pairs in parallel; a pair past its deadline is None (ungraded)."""
    return pool.grade(pairs)


def equivalent(gold: str, pred: str | None, pool: GradingPool) -> bool:
    """Whether `pred` is known to state the same answer as `gold` (the pool's verifier, gold first); an
    ungraded comparison is not."""
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


def group_answers(answers: list[str | None], pool: GradingPool) -> list[AnswerGroup]:
    """Equivalence classes of answers for majority voting, largest first; None or blank answers join no group.

    Spellings (`Verifier.spelling`) are taken most frequent first; each unassigned spelling founds a group and
    every remaining spelling equivalent to it (founder as gold) joins, so a group's answer is its most common
    spelling. An ungraded comparison is not known equal: that spelling stays out of the group and founds or
    joins another.
    """
    members_by_spelling: dict[str, list[int]] = {}
    for index, answer in enumerate(answers):
        spelling = pool.verifier.spelling(answer) if answer is not None else ""
        if spelling:
            members_by_spelling.setdefault(spelling, []).append(index)
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


def grade_completions(answers: Sequence[str], completions: Sequence[str], pool: GradingPool) -> list[Verdict]:
    """For each (reference answer, model output) pair, whether the output's final answer (the pool verifier's
    `extract`) is equivalent: False when it states none, None when its grading ran out of time."""
    extract = pool.verifier.extract
    return grade_many([(answer, extract(text)) for answer, text in zip(answers, completions, strict=True)], pool)


# A grading body, as executors run it: a batch of JSON-like items and the pool that grades them (with the world's
# verifier), to one result per item.
GradedFn = Callable[[list[Any], GradingPool], list[Any]]


def grade_answer_pairs(pairs: list[Sequence[str]], pool: GradingPool) -> list[Verdict]:
    """The answer check, as a grading body: `grade_completions` over (answer, output) pairs."""
    return grade_completions([answer for answer, _ in pairs], [output for _, output in pairs], pool)
