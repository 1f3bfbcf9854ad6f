"""Runs a check module under pytest and turns each outcome into a CheckResult, within a time limit."""

from __future__ import annotations

import ctypes
import io
import os
import threading
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from ..verdict import CheckResult, cause_of
from ..judge import budget
from ..judge.framework import CheckFailed, Unavailable

INI = Path(__file__).with_name("pytest.ini")


class CheckCollector:
    """A pytest plugin: provides the ``evidence`` fixture and records results."""

    def __init__(self, evidence, watchdog: "Watchdog | None" = None):
        self._evidence = evidence
        self.watchdog = watchdog
        self.results: list[CheckResult] = []
        self.collection_errors: list[str] = []

    @pytest.fixture(name="evidence")
    def evidence_fixture(self):
        return self._evidence

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item, call):
        outcome = yield
        report = outcome.get_result()
        if call.when == "call" or (call.when == "setup" and report.outcome != "passed"):
            marker = item.get_closest_marker("check")
            if marker is None:
                return
            status, message = classify(call.excinfo)
            meta = marker.kwargs
            points = float(meta["points"])
            explained = call.excinfo.value.cause if status == "failed" and isinstance(
                getattr(call.excinfo, "value", None), CheckFailed) else None
            self.results.append(
                CheckResult(
                    id=meta["id"],
                    title=meta["title"],
                    topic=meta["topic"],
                    status=status,
                    points=points if status == "passed" else 0.0,
                    max_points=points,
                    message=message,
                    cause=explained if explained and explained != meta["id"] else cause_of(status, message, meta["id"]),
                )
            )

    def pytest_itemcollected(self, item):
        # The verdict keeps the check's own message; pytest's traceback, which re-reads and parses
        # the source of every frame, would never be shown and costs more than the check.
        item.repr_failure = lambda excinfo, style=None: classify(excinfo)[1]

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_setup(self, item):
        marker = item.get_closest_marker("check")
        if hasattr(self._evidence, "current_check"):  # which check asks for evidence, for its messages
            self._evidence.current_check = marker.kwargs["id"] if marker else ""
        yield from self._timed()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_call(self, item):
        yield from self._timed()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_teardown(self, item):
        yield from self._timed()

    def _timed(self):
        """Around a check's setup, call and teardown: the only places the watchdog interrupts."""
        if self.watchdog is None:
            yield
            return
        self.watchdog.enter_check()
        try:
            yield
        finally:
            self.watchdog.leave_check()

    def pytest_sessionstart(self, session):
        from ..judge.framework import judging

        judging(self._evidence)
        if self.watchdog is not None:
            self.watchdog.session = session

    def pytest_collectreport(self, report):
        if report.failed:
            self.collection_errors.append(str(report.longrepr))


def follow_causes(results: list[CheckResult]) -> list[CheckResult]:
    """One cause, one failure: a skipped check that points to a check that was itself skipped,
    because of a third, points to that third, and says what the second says (the last step of the
    chain names the failure). A chain that ends nowhere, or comes back on itself, is left as it is."""
    from dataclasses import replace

    by_id = {r.id: r for r in results}
    followed = []
    for result in results:
        seen = {result.id}
        step = by_id.get(result.cause) if result.cause else None
        last = None
        while step is not None and step.status == "skipped" and step.cause and step.id not in seen:
            seen.add(step.id)
            last, step = step, by_id.get(step.cause)
        if last is not None and step is not None and step.status in ("failed", "error") and step.id != result.id:
            result = replace(result, message=last.message, cause=last.cause)
        followed.append(result)
    return followed


OUT_OF_MEMORY = "The grader could not judge this check's evidence within its memory limit."


def classify(excinfo) -> tuple[str, str]:
    if excinfo is None:
        return "passed", ""
    error = excinfo.value
    if isinstance(error, pytest.skip.Exception):
        return "skipped", str(getattr(error, "msg", error))
    if isinstance(error, Unavailable):
        return error.status, error.message
    if isinstance(error, CheckFailed):
        return "failed", str(error)
    if isinstance(error, budget.TooLarge):
        return "failed", (f"Not verified: {error}. A layer of this exercise needs a small fraction of that, so "
                          "the computation your grading process reported is not the exercise's.")
    if isinstance(error, AssertionError):
        return "failed", str(error).split("\nassert ")[0]
    if isinstance(error, MemoryError):
        return "error", OUT_OF_MEMORY
    return "error", f"The grader could not finish this check ({type(error).__name__}: {error})."


class ChecksOverran(Exception):
    """The checks of one submission did not finish within their time limit."""


class _TimeLimit(BaseException):
    """Raised inside the thread running the checks when their time is up (not an Exception, so no
    check's ``except Exception`` keeps it)."""


class Watchdog:
    """The time limit of one submission's checks.

    The clock starts when ``start()`` is called (when the evidence is complete: the checks wait for
    the child until then), or at the latest at the deadline given to ``deadline_within``. When it
    runs out, the watchdog tells pytest to stop after the current check and raises ``_TimeLimit``
    in the thread running the checks — only while that thread is inside a check's setup, call or
    teardown, where pytest records any exception as that check's outcome, never in pytest's own
    machinery — again every ``RETRY`` seconds while it stays there. When ``run_checks`` returns,
    nothing is left pending and the watchdog's thread has ended, so nothing of one submission's
    checks reaches the next one's."""

    RETRY = 0.5

    def __init__(self, seconds: float):
        self.seconds = float(seconds)
        self.expired = False
        self.session = None
        self._deadline: float | None = None
        self._done = False
        self._inside = False
        self._raised = False  # a _TimeLimit raised in the checks' thread since it last left a check
        self._target: int | None = None
        self._thread: threading.Thread | None = None
        self._condition = threading.Condition()

    def start(self) -> None:
        """Start the clock (once; later calls change nothing)."""
        self.deadline_within(self.seconds)

    def deadline_within(self, seconds: float) -> None:
        """Run out no later than ``seconds`` from now."""
        with self._condition:
            deadline = time.monotonic() + seconds
            if self._deadline is None or deadline < self._deadline:
                self._deadline = deadline
                self._condition.notify()

    def __enter__(self) -> "Watchdog":
        self._target = threading.get_ident()
        self._thread = threading.Thread(target=self._watch, daemon=True, name="checks-watchdog")
        self._thread.start()
        return self

    def __exit__(self, *_) -> None:
        with self._condition:
            self._done = True
            self._condition.notify()
        self._thread.join()

    def enter_check(self) -> None:
        with self._condition:
            self._inside = True
            self._condition.notify()

    def leave_check(self) -> None:
        while True:  # a _TimeLimit delivered on the way out is the check's; leaving goes on
            try:
                with self._condition:
                    self._inside = False
                    if self._raised:  # drop one raised but not yet delivered
                        self._raised = False
                        _raise_in(self._target, None)
                return
            except _TimeLimit:
                continue

    def _watch(self) -> None:
        with self._condition:
            while not self._done:
                now = time.monotonic()
                if self._deadline is None or now < self._deadline:
                    self._condition.wait(None if self._deadline is None else self._deadline - now)
                    continue
                self.expired = True
                if self.session is not None:
                    self.session.shouldstop = "the checks ran out of time"
                if self._inside:
                    _raise_in(self._target, _TimeLimit)
                    self._raised = True
                self._condition.wait(self.RETRY)


def _raise_in(thread_id: int, exception) -> None:
    """Raise ``exception`` in the thread, or with None drop one pending there. Called only when one
    may be pending: on Python 3.11, dropping leaves the thread's interpreter loop signalled, and
    under a profiler or a debugger (pdb, coverage) the thread then never leaves the lock it holds."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id),
                                               ctypes.py_object(exception) if exception is not None else None)


# pytest's plugins the checks never use, left out of every judge's session: each is registered anew per
# session, and some wrap every check (logging's handlers, warnings' catching) or collect a file twice
# (doctest), about a quarter of a judge's time; unraisableexception runs a full garbage collection per
# session. The checks keep what they rely on: assertion rewriting (the messages), skipping, capture.
UNUSED_PLUGINS = ("cacheprovider", "unraisableexception", "threadexception", "debugging", "unittest", "legacypath",
                  "tmpdir", "monkeypatch", "recwarn", "pastebin", "junitxml", "doctest", "setuponly", "setupplan",
                  "stepwise", "warnings", "logging", "subtests")


def run_checks(module: Path, evidence, watchdog: Watchdog | None = None) -> list[CheckResult]:
    """Run every ``@check`` in ``module`` against ``evidence``, in file order. With a ``watchdog``,
    checks that outlive its limit raise ChecksOverran."""
    collector = CheckCollector(evidence, watchdog)
    args = [
        str(module),
        "-c", str(INI),
        "--rootdir", str(module.parent),
        "--noconftest",
        *[argument for name in UNUSED_PLUGINS for argument in ("-p", f"no:{name}")],
        "-q",
    ]
    # Only the grader's own plugin: whatever else is installed does not take part in grading.
    saved = {k: os.environ.pop(k) for k in ("PYTEST_ADDOPTS", "PYTEST_PLUGINS", "PYTEST_DISABLE_PLUGIN_AUTOLOAD")
             if k in os.environ}
    os.environ["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    sink = io.StringIO()
    try:
        if watchdog is None:
            with redirect_stdout(sink), redirect_stderr(sink):
                pytest.main(args, plugins=[collector])
        else:
            with redirect_stdout(sink), redirect_stderr(sink), watchdog:
                pytest.main(args, plugins=[collector])
    finally:
        os.environ.pop("PYTEST_DISABLE_PLUGIN_AUTOLOAD", None)
        os.environ.update(saved)
    if watchdog is not None and watchdog.expired:
        raise ChecksOverran(f"the checks did not finish within {watchdog.seconds:g} s")
    if collector.collection_errors or not collector.results:
        raise RuntimeError(
            f"the checks in {module.name} could not be collected:\n" + "\n".join(collector.collection_errors)
            + sink.getvalue()[-2000:]
        )
    return follow_causes(collector.results)
