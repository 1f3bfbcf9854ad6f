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
    problem: str | None = None  # why it is not read: its verdict is an error that says so


def discover(paths: list[Path], exercise_id: str) -> list[Submission]:
    """Every .py or .ipynb file under ``paths``. In nbgrader's ``submitted/<student>/<assignment>/``
    layout the id is the student; otherwise the file's path below the folder given.

    A file (or folder) below a path given that is a symbolic link, is not a regular file, or lies
    outside the paths given is listed with its ``problem`` and is never read. Ids are unique, and
    every id a file would get on its own is kept for one of those files (the exercise's own file
    name first), before the others get ``<id>.<name>``: one student's extra files never take
    another student's id."""
    found: list[tuple[str, Path, str | None]] = []
    for root in paths:
        root = Path(root)
        if root.is_file():
            if root.suffix in SUFFIXES:
                path = root.resolve()
                found.append((_identify(path, path.parent), path, None))
        elif root.is_dir():
            found.extend(_walk(root.resolve()))
        else:
            raise FileNotFoundError(f"{root} does not exist")
    return _unique(found, exercise_id)


def _walk(root: Path):
    """(id, path, problem) of each candidate below ``root``, symbolic links not followed."""
    for folder, subfolders, files in os.walk(root, followlinks=False):
        here = Path(folder)
        for name in sorted(subfolders):
            if name in SKIPPED_FOLDERS:
                subfolders.remove(name)
            elif (here / name).is_symlink():
                subfolders.remove(name)
                yield _identify(here / name, root), here / name, "it is a symbolic link to a folder; nothing in it was read"
        subfolders.sort()
        for name in sorted(files):
            path = here / name
            if path.suffix not in SUFFIXES:
                continue
            yield _identify(path, root), path, _file_problem(path, root)


def _file_problem(path: Path, root: Path) -> str | None:
    import stat

    try:
        status = os.lstat(path)
    except OSError as exc:
        return f"it cannot be read ({exc.strerror})"
    if stat.S_ISLNK(status.st_mode):
        return "it is a symbolic link; the file it points to was not read"
    if not stat.S_ISREG(status.st_mode):
        return "it is not a regular file"
    if not Path(os.path.realpath(path)).is_relative_to(root):
        return "it lies outside the folders given"
    return None


def _unique(found: list[tuple[str, Path, str | None]], exercise_id: str) -> list[Submission]:
    groups: dict[str, list[tuple[Path, str | None]]] = {}
    for identity, path, problem in found:
        groups.setdefault(identity, []).append((path, problem))
    taken = set(groups)
    ids: dict[tuple[str, int], str] = {}
    for identity, members in groups.items():
        own = [i for i, (path, problem) in enumerate(members) if path.stem == exercise_id and problem is None]
        keeper = own[0] if own else 0
        for index in range(len(members)):
            if index == keeper:
                ids[identity, index] = identity
                continue
            candidate = f"{identity}.{re.sub(r'[^A-Za-z0-9_-]+', '_', members[index][0].stem)}"
            unique, count = candidate, 1
            while unique in taken:
                count += 1
                unique = f"{candidate}.{count}"
            taken.add(unique)
            ids[identity, index] = unique
    seen: dict[str, int] = {}
    submissions = []
    for identity, path, problem in found:
        index = seen.get(identity, 0)
        seen[identity] = index + 1
        submissions.append(Submission(ids[identity, index], path, problem))
    return submissions


def _identify(path: Path, base: Path) -> str:
    path = _unfollowed(path)  # a symbolic link is named by where it is, not by what it points to
    parts = path.parts
    if "submitted" in parts:
        index = len(parts) - 1 - parts[::-1].index("submitted")
        if len(parts) > index + 2:
            return parts[index + 1]
    relative = path.relative_to(base.resolve()) if path.is_relative_to(base.resolve()) else path
    return re.sub(r"[^A-Za-z0-9._-]+", "_", str(relative.with_suffix("")))


def _unfollowed(path: Path) -> Path:
    """``path`` made absolute with its folders resolved, its last part as it is."""
    path = Path(os.path.abspath(path))
    return Path(os.path.realpath(path.parent)) / path.name


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
                pending.append((submission, _start(exercise_id, submission, settings, workers), time.perf_counter()))

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


def _start(exercise_id: str, submission: Submission, settings: Settings, workers) -> Grading:
    """Start grading one submission; a failure of the grader here is that submission's error alone."""
    problem = getattr(submission, "problem", None)
    try:
        return Grading(exercise_id, submission.path, settings, runner=workers,
                       refusal=f"The submission was not read: {problem}." if problem else None)
    except Exception as exc:  # noqa: BLE001
        return Grading(exercise_id, submission.path, settings, runner=workers,
                       refusal=f"The submission could not be graded: the grader could not start it "
                               f"({type(exc).__name__}: {str(exc)[:300]}).")


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
