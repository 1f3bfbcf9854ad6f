"""Grades a whole class: many submissions, TensorFlow imported once.

A worker of the grader's own (``grader.forkserver``, ``grader.child.worker``)
imports TensorFlow and the probes once; every submission is graded in a child
forked from it, with the same scratch copy, limits, confinement and evidence
protocol as a single ``grade``. The parent never imports TensorFlow, runs the
same checks, and writes each result as soon as it is known, so an interrupted
batch keeps what it finished. Each submission gets exactly one result: nothing
one submission sends or does, and nothing that fails in the grader for it,
stops the others.

With ``--gradebook COURSE`` the verdicts then go through nbgrader's own
autograde, without executing the notebooks again (``grader.gradebook``).

Outputs in the ``--out`` folder:
- ``verdicts.jsonl``: one JSON verdict per line (the grading contract), ``submission`` the path graded;
- ``summary.csv``: id, status, score, max_score, seconds, submission;
- ``gradescope/<id>/results.json``: the verdict in Gradescope's results format.
"""

from __future__ import annotations

import csv
import json
import os
import re
import select
import time
from dataclasses import dataclass
from pathlib import Path

from . import exercises, forkserver
from .grading import Grading, Settings, max_points
from .sandbox import GradingProcess
from .verdict import error_verdict

SUFFIXES = (".py", ".ipynb")
SKIPPED_FOLDERS = {".ipynb_checkpoints", "__pycache__", ".git", ".venv", "node_modules"}


@dataclass(frozen=True)
class Submission:
    id: str
    path: Path


def discover(paths: list[Path], exercise_id: str) -> list[Submission]:
    """Every .py or .ipynb file under ``paths``. In nbgrader's ``submitted/<student>/<assignment>/``
    layout the id is the student; otherwise the file's path below the folder given."""
    found: list[tuple[str, Path]] = []
    for root in paths:
        root = Path(root)
        if root.is_file():
            files = [root] if root.suffix in SUFFIXES else []
            base = root.parent
        elif root.is_dir():
            files = sorted(
                p for p in root.rglob("*")
                if p.is_file() and p.suffix in SUFFIXES and not (set(p.relative_to(root).parts[:-1]) & SKIPPED_FOLDERS)
            )
            base = root
        else:
            raise FileNotFoundError(f"{root} does not exist")
        for path in files:
            found.append((_identify(path, base), path.resolve()))
    submissions, seen = [], {}
    for identity, path in found:
        count = seen.get(identity, 0)
        seen[identity] = count + 1
        submissions.append(Submission(identity if count == 0 else f"{identity}-{count + 1}", path))
    return submissions


def _identify(path: Path, base: Path) -> str:
    parts = path.resolve().parts
    if "submitted" in parts:
        index = len(parts) - 1 - parts[::-1].index("submitted")
        if len(parts) > index + 2:
            return parts[index + 1]
    relative = path.resolve().relative_to(base.resolve()) if path.resolve().is_relative_to(base.resolve()) else path
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(relative.with_suffix("")))


class Workers:
    """The runner of ``grade batch``: one worker with TensorFlow imported (``grader.forkserver``,
    replaced whenever it fails), and one forked child per submission."""

    def __init__(self, ready_seconds: float = forkserver.READY_SECONDS,
                 fork_seconds: float = forkserver.FORK_SECONDS):
        # Start importing TensorFlow in the worker now, and meanwhile load the parent's own
        # tools (pytest, the checks), which the first result would otherwise wait for.
        self.server = forkserver.ForkServer(ready_seconds, fork_seconds)
        from .checks import plugin  # noqa: F401

    def __call__(self, job: dict, source: str, timeout: float, memory_mb: int, respond=None) -> "ForkedChild":
        return ForkedChild(self.server, job, source, timeout, memory_mb, respond)

    @property
    def pid(self) -> int | None:
        """The current worker's process id (None between a failure and the next start)."""
        return self.server.worker.pid if self.server.worker is not None else None

    def close(self) -> None:
        self.server.close()


class ForkedChild(GradingProcess):
    """One submission in a child forked by the worker; the same waiting and results as ``sandbox.Child``."""

    def __init__(self, server: "forkserver.ForkServer", job: dict, source: str, timeout: float, memory_mb: int,
                 respond=None):
        self._server = server
        self.pid: int | None = None
        super().__init__(job, source, timeout, memory_mb, respond)

    def _launch(self, descriptors: list[int], environment: dict) -> int:
        self.pid, pidfd = self._server.fork(descriptors, environment)
        return pidfd


@dataclass
class Result:
    submission: Submission
    verdict: object
    seconds: float


class Outputs:
    """Writes each result as it arrives: nothing is lost if the batch stops half way."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._jsonl = open(self.folder / "verdicts.jsonl", "w", encoding="utf-8")
        self._csv_file = open(self.folder / "summary.csv", "w", encoding="utf-8", newline="")
        self._csv = csv.writer(self._csv_file)
        self._csv.writerow(["id", "status", "score", "max_score", "seconds", "submission"])

    def write(self, result: Result) -> None:
        verdict = result.verdict
        self._jsonl.write(json.dumps(verdict.to_json()) + "\n")
        self._jsonl.flush()
        self._csv.writerow([result.submission.id, verdict.status, verdict.score, verdict.max_score,
                            f"{result.seconds:.2f}", verdict.submission])
        self._csv_file.flush()
        folder = self.folder / "gradescope" / result.submission.id
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "results.json").write_text(json.dumps(gradescope(verdict), indent=1), encoding="utf-8")

    def close(self) -> None:
        self._jsonl.close()
        self._csv_file.close()


def gradescope(verdict) -> dict:
    """The verdict in Gradescope's autograder results.json format."""
    if verdict.status == "error":
        return {"score": 0.0, "output": verdict.error, "tests": [
            {"name": "The submission could be graded", "score": 0.0, "max_score": verdict.max_score,
             "status": "failed", "output": verdict.error}]}
    return {
        "score": verdict.score,
        "tests": [
            {"name": f"{c.title} ({c.id})", "number": c.id, "tags": [c.topic], "score": c.points,
             "max_score": c.max_points, "status": "passed" if c.status == "passed" else "failed",
             "output": c.message}
            for c in verdict.checks
        ],
    }


def run_batch(exercise_id: str, submissions: list[Submission], out: Path, settings: Settings = Settings(),
              jobs: int | None = None, on_result=None, workers: "Workers | None" = None) -> list[Result]:
    """Grade every submission, ``jobs`` at a time; call ``on_result(result)`` as each finishes.

    Every submission gets exactly one result: whatever one submission's child sends or does, and
    whatever fails in the grader for it (reading, checking, writing), becomes an error verdict for
    it alone. Children and scratch folders are gone when this returns, or raises."""
    exercises.get(exercise_id)
    jobs = max(1, jobs or len(os.sched_getaffinity(0)))
    outputs = Outputs(out)
    own_workers = workers is None
    results: list[Result] = []
    queue = list(submissions)
    pending: list[tuple[Submission, Grading, float]] = []
    try:
        if own_workers:
            workers = Workers()

        def start_more():
            while queue and len(pending) < jobs:
                submission = queue.pop(0)
                pending.append((submission, Grading(exercise_id, submission.path, settings, runner=workers,
                                                    refusal=getattr(submission, "problem", None)),
                                time.perf_counter()))

        start_more()
        while pending:
            submission, grading, started = pending.pop(_next_ready(pending))
            start_more()  # the next child runs while this one's checks do
            result = Result(submission, grading.finish(), time.perf_counter() - started)
            result = _write(outputs, result, grading)
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


def _write(outputs: "Outputs", result: Result, grading: Grading) -> Result:
    """Write one result; if the grader cannot, the submission's result is an error that says so."""
    try:
        outputs.write(result)
        return result
    except Exception as exc:  # noqa: BLE001 - one submission's files, not the whole batch
        failed = Result(result.submission, error_verdict(
            grading.exercise.id, str(grading.path),
            f"The submission was graded, but the grader could not write its results ({type(exc).__name__}: "
            f"{str(exc)[:300]}).", max_points(grading.exercise.id), grading.context), result.seconds)
        try:
            outputs.write(failed)
        except Exception:  # noqa: BLE001 - the folder is unusable; the result is still returned
            pass
        return failed


def _next_ready(pending) -> int:
    """The first pending grading whose child has finished (or run out of time), waiting for one."""
    while True:
        children = []
        for index, (_, grading, _) in enumerate(pending):
            if grading.child is None or grading.child.ready():
                return index
            children.append(grading.child)
        poller = select.poll()
        for child in children:
            poller.register(child.sentinel, select.POLLIN)
        poller.poll(int(min(c.seconds_left() for c in children) * 1000) + 10)
