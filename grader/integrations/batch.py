"""Grades a whole class: many submissions, TensorFlow imported once.

The warm worker (``grader.workers``) imports TensorFlow and the probes once; every submission
(``grader.integrations.discovery``) is graded in a child forked from it, with the same scratch copy,
limits, confinement and evidence protocol as a single ``grade``. The parent never imports
TensorFlow, runs the same checks, and writes each result as soon as it is known
(``grader.integrations.outputs``, which lists the files), so an interrupted batch keeps what it
finished. Each submission gets exactly one result: nothing one submission sends or does, and
nothing that fails in the grader for it, stops the others.

With ``--gradebook COURSE`` the verdicts then go through nbgrader's own
autograde, without executing the notebooks again (``grader.integrations.gradebook``).
"""

from __future__ import annotations

import os
import select
import time
from dataclasses import replace
from pathlib import Path

from .. import exercises
from ..api import Grading, Settings
from ..workers import Workers
from .discovery import Submission, private_folders
from .outputs import Outputs, Result, StartedRun, write_result


def run_batch(exercise_id: str, submissions: list[Submission], out: Path, settings: Settings = Settings(),
              jobs: int | None = None, on_result=None, workers: "Workers | None" = None, resume: bool = False,
              started: StartedRun | None = None) -> list[Result]:
    """Grade every submission, ``jobs`` at a time; call ``on_result(result)`` as each finishes.

    Every submission gets exactly one result: whatever one submission's child sends or does, and
    whatever fails in the grader for it (reading, checking, writing), becomes an error verdict for
    it alone. Children and scratch folders are gone when this returns, or raises. ``resume`` adds
    the results to the whole ones already in ``out`` (``Outputs``); ``started``, the run's record."""
    exercises.get(exercise_id)
    jobs = max(1, jobs or default_jobs())
    # no grading may read the class's own folders, wherever they lie
    settings = replace(settings, private=tuple(dict.fromkeys([*settings.private, *private_folders(submissions)])))
    outputs = Outputs(out, append=resume, started=started)
    own_workers = workers is None
    results: list[Result] = []
    queue = list(submissions)
    pending: list[tuple[Submission, Grading, float]] = []
    try:
        if own_workers:
            workers = Workers(backend=settings.backend)

        def start_more():
            while queue and len(pending) < jobs:
                submission = queue.pop(0)
                pending.append((submission, _start(exercise_id, submission, settings, workers), time.perf_counter()))

        start_more()
        while pending:
            index = _next_ready(pending)
            submission, grading, started = pending[index]
            if not grading.advance():
                continue  # its child has ended and its judge started: the judge is waited for like a child
            pending.pop(index)
            start_more()
            result = Result(submission, grading.finish(), time.perf_counter() - started)
            result = write_result(outputs, result)
            results.append(result)
            if on_result is not None:
                on_result(result)
    finally:
        for _, grading, _ in pending:  # stopped early: leave no child running
            grading.close()
        if own_workers and workers is not None:
            workers.close()
        outputs.close()
    return results


def default_jobs() -> int:
    """Twice the cores available: a grading spends part of its time starting its processes and
    waiting for the parent (its secrets, its checks), so more gradings than cores keep them busy."""
    return 2 * len(os.sched_getaffinity(0))


def _start(exercise_id: str, submission: Submission, settings: Settings, workers) -> Grading:
    """Start grading one submission; a failure of the grader here is that submission's error alone."""
    try:
        return Grading(exercise_id, submission.path, settings, runner=workers)
    except Exception as exc:  # noqa: BLE001
        return Grading(exercise_id, submission.path, settings, runner=workers,
                       refusal=f"The submission could not be graded: the grader could not start it "
                               f"({type(exc).__name__}: {str(exc)[:300]}).")


def _next_ready(pending) -> int:
    """The first pending grading whose current stage (its child, or its judge) has ended or run
    out of time, waiting for one."""
    while True:
        waiting = []
        for index, (_, grading, _) in enumerate(pending):
            if grading.ready() or grading.sentinel is None:
                return index
            waiting.append(grading)
        poller = select.poll()
        for grading in waiting:
            poller.register(grading.sentinel, select.POLLIN)
        poller.poll(int(min(g.next_look() for g in waiting) * 1000) + 10)
