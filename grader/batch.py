"""Grades a whole class: many submissions, TensorFlow imported once.

A multiprocessing fork server imports TensorFlow and the probes once
(``grader.child.preload``); every submission is graded in a fresh child forked
from it (``grader.child.forked``), with the same scratch copy, limits, Landlock
confinement and evidence protocol as a single ``grade``. The parent never
imports TensorFlow, runs the same checks, and writes each result as soon as it
is known, so an interrupted batch keeps what it finished.

With ``--gradebook COURSE`` the verdicts then go through nbgrader's own
autograde, without executing the notebooks again (``grader.gradebook``).

Outputs in the ``--out`` folder:
- ``verdicts.jsonl``: one JSON verdict per line (the grading contract), ``submission`` the path graded;
- ``summary.csv``: id, status, score, max_score, seconds, submission;
- ``gradescope/<id>/results.json``: the verdict in Gradescope's results format (``grader.platforms``).
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from . import exercises
from .grading import Grading, Settings
from .sandbox import (
    MAX_FILE_BYTES, MAX_OUTPUT_BYTES, ChildRun, ControlChannel, RecordParser, child_environment, end_run,
    make_scratch,
)

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
    """The fork server: started on first use, TensorFlow imported once, then one fork per submission."""

    def __init__(self):
        import multiprocessing
        import multiprocessing.forkserver

        self._context = multiprocessing.get_context("forkserver")
        self._context.set_forkserver_preload(["grader.child.preload"])
        # Start importing TensorFlow in the worker now, and meanwhile load the parent's own
        # tools (pytest, the checks), which the first result would otherwise wait for.
        multiprocessing.forkserver.ensure_running()
        from .checks import plugin  # noqa: F401

    def __call__(self, job: dict, source: str, timeout: float, memory_mb: int, respond=None) -> "ForkedChild":
        return ForkedChild(self._context, job, source, timeout, memory_mb, respond)


class ForkedChild:
    """One submission in a forked child; ``wait()`` gives its ChildRun, as sandbox.Child does."""

    def __init__(self, context, job: dict, source: str, timeout: float, memory_mb: int, respond=None):
        from .child import forked

        self._scratch, job = make_scratch(job, source)
        self._private = tempfile.mkdtemp(prefix="grade-private-")
        self._timeout = timeout
        self._result: ChildRun | None = None
        self._stdout = os.path.join(self._private, "stdout")
        self._stderr = os.path.join(self._private, "stderr")
        receiver, sender = context.Pipe(duplex=False)
        control_receiver, control_sender = context.Pipe(duplex=False)
        self._started = time.perf_counter()
        self._process = context.Process(
            target=forked.run,
            args=(json.dumps(job), sender, control_receiver, self._stdout, self._stderr, memory_mb, MAX_FILE_BYTES,
                  child_environment(self._scratch)),
            daemon=False,
        )
        self._process.start()
        sender.close()
        control_receiver.close()
        self._control = ControlChannel(control_sender.send_bytes, control_sender.close)
        self._parser = RecordParser(ChildRun(), respond, self._control)
        self._reader = threading.Thread(target=self._read, args=(receiver,), daemon=True)
        self._reader.start()

    def _read(self, receiver) -> None:
        try:
            while True:
                self._parser.feed(receiver.recv_bytes())
        except (EOFError, OSError):
            pass
        finally:
            receiver.close()

    @property
    def sentinel(self) -> int:
        return self._process.sentinel

    def ready(self) -> bool:
        """Finished, or out of time (``wait`` then kills it at once)."""
        return (self._process.exitcode is not None
                or time.perf_counter() - self._started >= self._timeout)

    def seconds_left(self) -> float:
        return max(0.0, self._timeout - (time.perf_counter() - self._started))

    def kill(self) -> None:
        self._timeout = 0.0
        self.wait()

    def wait(self) -> ChildRun:
        if self._result is not None:
            return self._result
        run = self._parser.run
        remaining = self._timeout - (time.perf_counter() - self._started)
        self._process.join(max(remaining, 0.0))
        if self._process.exitcode is None:
            run.timed_out = True
        try:
            os.killpg(self._process.pid, signal.SIGKILL)  # the child and anything it started
        except (ProcessLookupError, PermissionError):
            pass
        self._process.join()
        self._reader.join(timeout=5)
        self._control.close()
        end_run(run, self._started, self._process.exitcode, _capped(self._stdout), _capped(self._stderr))
        self._parser.finish()
        shutil.rmtree(self._scratch, ignore_errors=True)
        shutil.rmtree(self._private, ignore_errors=True)
        self._result = run
        return run


def _capped(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_OUTPUT_BYTES + 1)
    except OSError:
        return ""
    text = data[:MAX_OUTPUT_BYTES].decode("utf-8", errors="replace").replace("\x00", "")
    return text + ("\n[... output cut ...]\n" if len(data) > MAX_OUTPUT_BYTES else "")


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
    """The verdict in Gradescope's autograder results.json format (``grader.platforms``), with the
    visibility ``grade batch --gradescope-visibility`` chose."""
    from .platforms import gradescope_results

    return gradescope_results(verdict)


def run_batch(exercise_id: str, submissions: list[Submission], out: Path, settings: Settings = Settings(),
              jobs: int | None = None, on_result=None) -> list[Result]:
    """Grade every submission, ``jobs`` at a time; call ``on_result(result)`` as each finishes."""
    exercises.get(exercise_id)
    jobs = max(1, jobs or len(os.sched_getaffinity(0)))
    workers = Workers()
    outputs = Outputs(out)
    results: list[Result] = []
    queue = list(submissions)
    pending: list[tuple[Submission, Grading, float]] = []
    try:
        def start_more():
            while queue and len(pending) < jobs:
                submission = queue.pop(0)
                pending.append((submission, Grading(exercise_id, submission.path, settings, runner=workers),
                                time.perf_counter()))

        start_more()
        while pending:
            submission, grading, started = pending.pop(_next_ready(pending))
            start_more()  # the next child runs while this one's checks do
            result = Result(submission, grading.finish(), time.perf_counter() - started)
            outputs.write(result)
            results.append(result)
            if on_result is not None:
                on_result(result)
    finally:
        outputs.close()
        for _, grading, _ in pending:  # stopped early: leave no child running
            if grading.child is not None:
                grading.child.kill()
    return results


def _next_ready(pending) -> int:
    """The first pending grading whose child has finished (or run out of time), waiting for one."""
    from multiprocessing.connection import wait

    while True:
        for index, (_, grading, _) in enumerate(pending):
            if grading.child is None or grading.child.ready():
                return index
        children = [g.child for _, g, _ in pending]
        wait([c.sentinel for c in children], timeout=min(c.seconds_left() for c in children) + 0.01)
