"""Grades a whole class: many submissions, TensorFlow imported once.

A worker of the grader's own (``grader.sandbox.forkserver``, ``grader.probe.worker``)
imports TensorFlow and the probes once; every submission is graded in a child
forked from it, with the same scratch copy, limits, confinement and evidence
protocol as a single ``grade``. The parent never imports TensorFlow, runs the
same checks, and writes each result as soon as it is known, so an interrupted
batch keeps what it finished. Each submission gets exactly one result: nothing
one submission sends or does, and nothing that fails in the grader for it,
stops the others.

With ``--gradebook COURSE`` the verdicts then go through nbgrader's own
autograde, without executing the notebooks again (``grader.integrations.gradebook``).

Outputs in the ``--out`` folder, sorted by id once the run ends:
- ``verdicts.jsonl``: one JSON verdict per line (the grading contract), ``submission`` the path
  graded, plus ``id``, ``student`` (nbgrader's, or null), ``graded_at`` (UTC), ``seed``,
  ``grader_version`` and ``manual_points`` (points of answers graded by hand in nbgrader, which
  no autograded score includes);
- ``summary.csv``: id, status, score, max_score, seconds, submission, manual_points (an id or path
  that a spreadsheet would run as a formula starts with an apostrophe);
- ``gradescope/<id>/results.json``: the verdict in Gradescope's results format (``grader.integrations.platforms``);
- once the run ends, ``run.json`` (its manifest: exercise, shard, seed, grader version, the class's
  ids, the paths not graded; ``grader.integrations.shards``), ``report.html``, the class at a glance, and
  ``students/<name>.html``, each student's own report (``grader.integrations.class_report``).
"""

from __future__ import annotations

import csv
import hashlib
import json
import os
import re
import select
import shutil
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path

from .. import exercises
from ..sandbox import forkserver
from ..api import Grading, Settings, max_points
from ..sandbox.process import GradingProcess
from ..verdict import error_verdict
from .results import MANIFEST, STARTED, cell, printable, replace_file

SUFFIXES = (".py", ".ipynb")
SKIPPED_FOLDERS = {".ipynb_checkpoints", "__pycache__", ".git", ".venv", "node_modules"}
# Besides a submitted/ folder, the signs that a folder is an nbgrader course.
COURSE_MARKERS = ("nbgrader_config.py", "gradebook.db")
NBGRADER_TIMESTAMP = "timestamp.txt"  # nbgrader collect's own file in every submission folder: not stray


@dataclass(frozen=True)
class Submission:
    id: str
    path: Path
    student: str | None = None  # nbgrader's student, for a file in submitted/<student>/<exercise>/
    refused: str | None = None  # why the file is not read: its row is an error


@dataclass(frozen=True)
class Skipped:
    path: Path
    why: str


@dataclass
class Discovery:
    """What ``survey`` found under the paths given."""

    submissions: list[Submission] = field(default_factory=list)  # to grade
    refused: list[Submission] = field(default_factory=list)  # error rows, never read
    skipped: list[Skipped] = field(default_factory=list)  # not a submission of this exercise
    searched: list[tuple[Path, Path]] = field(default_factory=list)  # (course given, its submitted/ folder)
    given: list[Path] = field(default_factory=list)  # the folders given (a file: its folder), resolved

    def private(self) -> list[str]:
        """The folders no grading of this class may read: those given, whole (a classmate's other
        files, folders nothing was graded from, an nbgrader course's source and gradebook), and
        the folders the refused links point into."""
        folders = [str(folder) for folder in self.given]
        folders += [os.path.dirname(os.path.realpath(s.path)) for s in self.refused]
        return list(dict.fromkeys(folders))


class LayoutError(ValueError):
    """A path given cannot be searched for submissions; the message says what to give instead."""


def survey(paths: list[Path], exercise_id: str) -> Discovery:
    """Find the submissions of ``exercise_id`` under ``paths``.

    In nbgrader's layout (an nbgrader course folder, its ``submitted/``, a student's folder in it
    or a student's assignment folder) only ``submitted/<student>/<exercise>/`` is graded, one file
    per student, the student being its id: ``<exercise>.ipynb``, else ``<exercise>.py``, else the
    only notebook or ``.py`` file there. Other assignments and stray files are skipped and listed.
    Elsewhere every ``.py`` or ``.ipynb`` file is graded, its id being its path below the folder
    given. A symbolic link where a submission would be, or a file that resolves outside the path
    given, is refused: an error row, never read. Ids are unique, and a student's id is always the
    student's own name.
    """
    found = Discovery()
    for given in paths:
        given = Path(given)
        if not given.exists():
            raise FileNotFoundError(f"{given} does not exist")
        root = given.resolve()
        found.given.append(root.parent if root.is_file() else root)
        if root.is_file():
            _add_file(found, given.absolute(), root.parent, exercise_id)
        elif _is_course(root):
            submitted = root / "submitted"
            if not submitted.is_dir() or submitted.is_symlink():
                raise LayoutError(f"{given} is an nbgrader course folder without a submitted/ folder: collect "
                                  "the submissions first (nbgrader collect or zip_collect), or give the folder "
                                  "that holds them")
            found.searched.append((root, submitted))
            _students(found, submitted, exercise_id)
        elif root.name == "submitted":
            _students(found, root, exercise_id)
        elif root.parent.name == "submitted":
            _student(found, root, root.name, exercise_id)
        elif root.parent.parent.name == "submitted":
            if root.name == exercise_id:
                _assignment(found, root, root.parent.name, exercise_id)
            else:
                found.skipped.append(Skipped(root, f"another assignment ({root.name}), not {exercise_id}"))
        else:
            _loose(found, root)
    found.submissions, found.refused = _unique(found.submissions, found.refused)
    return found


def _is_course(folder: Path) -> bool:
    return (folder / "submitted").is_dir() or any((folder / marker).exists() for marker in COURSE_MARKERS)


def _hidden(name: str) -> bool:
    return name.startswith(".") or name in SKIPPED_FOLDERS


def _entries(folder: Path) -> list[os.DirEntry]:
    with os.scandir(folder) as scan:
        return sorted((e for e in scan if not _hidden(e.name)), key=lambda e: e.name)


def _students(found: Discovery, submitted: Path, exercise_id: str) -> None:
    for entry in _entries(submitted):
        path = Path(entry.path)
        if entry.is_symlink():
            if path.suffix in SUFFIXES or entry.is_dir():
                found.refused.append(Submission(entry.name, path, entry.name, "is a symbolic link"))
            else:
                found.skipped.append(Skipped(path, "not a student's folder"))
        elif entry.is_dir(follow_symlinks=False):
            _student(found, path, entry.name, exercise_id)
        else:
            found.skipped.append(Skipped(path, "not in a student's folder"))


def _student(found: Discovery, folder: Path, student: str, exercise_id: str) -> None:
    handed_in = []
    for entry in _entries(folder):
        path = Path(entry.path)
        if entry.name == exercise_id and entry.is_symlink():
            found.refused.append(Submission(student, path, student, "is a symbolic link"))
            handed_in.append(entry.name)
        elif entry.name == exercise_id and entry.is_dir(follow_symlinks=False):
            _assignment(found, path, student, exercise_id)
            handed_in.append(entry.name)
        elif entry.is_dir(follow_symlinks=False):
            found.skipped.append(Skipped(path, f"another assignment ({entry.name}), not {exercise_id}"))
        else:
            found.skipped.append(Skipped(path, f"not in an assignment folder of {student}"))
    if not handed_in:
        found.skipped.append(Skipped(folder, f"{student} has no {exercise_id} folder"))


def _assignment(found: Discovery, folder: Path, student: str, exercise_id: str) -> None:
    """One student's submission of the exercise: the file graded, the others listed."""
    candidates = _files(folder)
    by_name = {p.relative_to(folder).as_posix(): p for p in candidates}
    top = [p for p in candidates if p.parent == folder]
    chosen = by_name.get(f"{exercise_id}.ipynb") or by_name.get(f"{exercise_id}.py") or (
        top[0] if len(top) == 1 else None)
    if chosen is None:
        if candidates:
            names = ", ".join(p.relative_to(folder).as_posix() for p in candidates)
            why = (f"holds several files that could be the answer ({names}) and none is named "
                   f"{exercise_id}.ipynb")
        else:
            why = "holds no .ipynb or .py file"
        found.refused.append(Submission(student, folder, student, why))
        return
    for other in candidates:
        if other != chosen:
            found.skipped.append(Skipped(other, f"not the file graded for {student} ({chosen.name})"))
    for other in _files(folder, every=True):
        if other.suffix not in SUFFIXES and other != folder / NBGRADER_TIMESTAMP:
            found.skipped.append(Skipped(other, f"not a .py or .ipynb file, not graded for {student}"))
    _add(found, Submission(student, chosen, student), folder)


def _files(folder: Path, every: bool = False) -> list[Path]:
    """The .py and .ipynb files under ``folder`` (``every``: all files), symbolic links included,
    without following any; hidden ones (.ipynb_checkpoints, dotfiles) left out."""
    files = []
    for current, folders, names in os.walk(folder):
        folders[:] = sorted(f for f in folders if not _hidden(f))
        files += [Path(current) / n for n in sorted(names)
                  if not _hidden(n) and (every or Path(n).suffix in SUFFIXES)]
    return files


def _loose(found: Discovery, root: Path) -> None:
    for current, folders, names in os.walk(root):
        for name in sorted(folders):
            if not _hidden(name) and (Path(current) / name).is_symlink():
                found.skipped.append(Skipped(Path(current) / name, "a symbolic link to a folder, not followed"))
        folders[:] = sorted(f for f in folders if not _hidden(f))
        for name in sorted(names):
            path = Path(current) / name
            if _hidden(name):
                continue
            if path.suffix in SUFFIXES:
                _add_file(found, path, root, None)
            else:
                found.skipped.append(Skipped(path, "not a .py or .ipynb file"))


def _add_file(found: Discovery, path: Path, base: Path, exercise_id: str | None) -> None:
    """A file found outside nbgrader's layout, or given by name."""
    if path.suffix not in SUFFIXES:
        found.skipped.append(Skipped(path, "not a .py or .ipynb file"))
        return
    student = _layout_student(path, exercise_id) if exercise_id else None
    _add(found, Submission(student or _identify(path, base), path, student), base)


def _layout_student(path: Path, exercise_id: str) -> str | None:
    """The student of a file given by name at ``submitted/<student>/<exercise>/<file>``."""
    parts = path.absolute().parts
    if len(parts) >= 4 and parts[-4] == "submitted" and parts[-2] == exercise_id:
        return parts[-3]
    return None


def _add(found: Discovery, submission: Submission, inside: Path) -> None:
    path = submission.path
    if path.is_symlink():
        found.refused.append(replace(submission, refused="is a symbolic link"))
    elif not path.resolve().is_relative_to(inside.resolve()):
        found.refused.append(replace(submission, refused=f"resolves outside {inside}"))
    else:
        found.submissions.append(replace(submission, path=path.resolve()))


MAX_ID = 100


def _identify(path: Path, base: Path) -> str:
    """A file's id outside nbgrader's layout: its path below the folder given, without suffix. It
    depends on nothing above that folder, so the same class copied anywhere, on any machine, gets
    the same ids (and so the same shares)."""
    path, base = path.absolute(), base.absolute()
    relative = path.relative_to(base) if path.is_relative_to(base) else Path(path.name)
    identity = re.sub(r"[^A-Za-z0-9._-]+", "_", relative.with_suffix("").as_posix()).strip("._") or "submission"
    if len(identity) > MAX_ID:  # an id names a folder of the results: keep it well inside a file name's limit
        digest = hashlib.sha256(os.fsencode(relative.as_posix())).hexdigest()[:10]
        identity = f"{identity[:MAX_ID - 11]}-{digest}"
    return identity


def _unique(submissions: list[Submission], refused: list[Submission]):
    """One row per file, and one id per row: the same file found twice is graded once; a student
    keeps the student's own name (the first, if folders of two courses hold the same name), and any
    other row whose id is taken gets the first free ``<id>-<n>``, never an id that a student or
    another file has as its own."""
    seen, graded = set(), []
    for submission in submissions:
        if submission.path not in seen:
            seen.add(submission.path)
            graded.append(submission)
    rows = [(s, True) for s in graded] + [(s, False) for s in refused]
    reserved = {s.id for s, _ in rows}
    order = sorted(range(len(rows)), key=lambda i: rows[i][0].student is None)  # students first
    taken, named = set(), {}
    for index in order:
        base = rows[index][0].id
        identity, count = base, 1
        while identity in taken or (identity != base and identity in reserved):
            count += 1
            identity = f"{base}-{count}"
        taken.add(identity)
        named[index] = replace(rows[index][0], id=identity)
    ordered = [named[i] for i in range(len(rows))]
    return [s for s, (_, ok) in zip(ordered, rows) if ok], [s for s, (_, ok) in zip(ordered, rows) if not ok]


class Workers:
    """The runner of ``grade batch``, of ``--watch`` and of the grading server (``grader.server``): one
    worker with TensorFlow imported (``grader.sandbox.forkserver``, replaced whenever it fails), and
    one forked child per submission."""

    def __init__(self, ready_seconds: float = forkserver.READY_SECONDS,
                 fork_seconds: float = forkserver.FORK_SECONDS, backend: str = "tensorflow"):
        # Start importing Keras and its backend in the worker now, and meanwhile the judge server's
        # own imports (pytest, the checks), which the first result would otherwise wait for. A
        # worker preloads one backend: its forks grade on that backend only.
        from ..sandbox.process import child_environment, fresh_environment

        self.backend = backend
        environment = dict(fresh_environment(), **child_environment(), KERAS_BACKEND=backend)
        self.server = forkserver.ForkServer(ready_seconds, fork_seconds, environment=environment)
        from ..judge.client import shared_judges

        shared_judges()

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
        self.pid, pidfd = self._server.fork(descriptors, {"environment": environment})
        return pidfd


@dataclass
class Result:
    submission: Submission
    verdict: object
    seconds: float


RESULT_FILES = ("verdicts.jsonl", "summary.csv", "gradescope", STARTED, MANIFEST, "report.html", "students")
SUMMARY_COLUMNS = ["id", "status", "score", "max_score", "seconds", "submission", "manual_points"]


def refused_result(exercise_id: str, submission: Submission) -> Result:
    """The error row of a submission that was refused: nothing of it was read or run."""
    from ..api import max_points
    from ..verdict import error_verdict

    message = f"{submission.path} {submission.refused}, so nothing was graded."
    if submission.refused == "is a symbolic link":
        message += " A submission must be the file itself."
    verdict = error_verdict(exercise_id, str(submission.path), message, max_points(exercise_id), {})
    return Result(submission, verdict, 0.0)


class ResultsFolderError(Exception):
    """The results folder cannot be used as it is; the message says what to do."""


def prepare_results_folder(folder: Path, force: bool = False) -> None:
    """Check that ``folder`` can take a run's results before anything is graded: it is new or
    empty, or ``force`` is given, and then the results of an earlier run in it are removed (nothing
    else is)."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ResultsFolderError(f"{folder} is a file: --out takes a folder")
    if folder.is_dir() and any(folder.iterdir()):
        if not force:
            raise ResultsFolderError(f"{folder} is not empty: give a new folder, or --force to replace the "
                                     "results of an earlier run in it (--resume to finish that run)")
        _remove_results(folder)


def _remove_results(folder: Path, keep: tuple[str, ...] = ()) -> None:
    for name in RESULT_FILES:
        path = folder / name
        if name in keep:
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


def _summary_text(rows) -> str:
    import io

    text = io.StringIO()
    writer = csv.writer(text)
    writer.writerow(SUMMARY_COLUMNS)
    writer.writerows(rows)
    return text.getvalue()


def finished_rows(folder: Path) -> list[tuple[str, list, str]]:
    """The results a run wrote into ``folder`` that are whole: (id, summary row, verdicts line), in
    the order written. A row is kept only with its verdict line (the row is written first, the line
    last): a line or a row cut short by a kill, and a row whose line never came, are left out, and
    their submissions are graded again."""
    folder = Path(folder)
    try:
        # a row cut short may end inside a character; whole rows are whole UTF-8
        with open(folder / "summary.csv", encoding="utf-8", errors="replace", newline="") as handle:
            table = list(csv.reader(handle))
        text = (folder / "verdicts.jsonl").read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    if table and table[0] != SUMMARY_COLUMNS:
        raise ResultsFolderError(f"{folder / 'summary.csv'} is not a summary this grader writes (its columns are "
                                 f"{', '.join(table[0])}): give --force to grade from the start")
    rows: dict[str, list[list]] = {}
    for row in table[1:]:
        if len(row) == len(SUMMARY_COLUMNS):
            rows.setdefault(row[0], []).append(row)
    found, seen = [], set()
    for line in text.split("\n"):
        try:
            identity = json.loads(line)["id"]
        except (ValueError, KeyError, TypeError):
            continue  # empty, or cut short
        if not isinstance(identity, str) or identity in seen:
            continue
        waiting = rows.get(cell(printable(identity)))  # the CSV's cell of that id
        if waiting:
            seen.add(identity)
            found.append((identity, waiting.pop(0), line))
    return found


class StartedRun:
    """The manifest of a run under way (``run.started.json``): what ``grade batch --resume`` checks
    a later run against. It is written before the first grading, kept current with the sandbox lines
    of the gradings so far, and replaced by ``run.json`` when the run finishes (``finish_run``)."""

    def __init__(self, folder: Path, record: dict):
        self.path = Path(folder) / STARTED
        self.record = dict(record, sandbox=sorted(set(record.get("sandbox") or ())))

    @classmethod
    def begin(cls, folder: Path, planned: dict, earlier: dict | None = None) -> "StartedRun":
        """Record the run ``planned`` (a manifest, ``grader.integrations.shards.manifest``) in
        ``folder``; ``earlier``, the record of the run it resumes, gives the sandbox lines so far."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        lines = [*(planned.get("sandbox") or ()), *((earlier or {}).get("sandbox") or ())]
        run = cls(folder, dict(planned, sandbox=lines))
        run.save()
        for name in (MANIFEST, "report.html"):  # a finished run's, written again when this one finishes
            (folder / name).unlink(missing_ok=True)
        return run

    def note(self, verdict) -> None:
        from .shards import class_line

        line = class_line(verdict.context.get("sandbox") or "")
        if line and line not in self.record["sandbox"]:
            self.record["sandbox"] = sorted([*self.record["sandbox"], line])
            self.save()

    def save(self) -> None:
        replace_file(self.path, json.dumps(self.record, indent=1) + "\n")


def read_run_record(folder: Path) -> dict | None:
    """What ``folder`` records of the run that wrote it: the manifest of a run under way, else of a
    run that finished; None if neither is there."""
    for name in (STARTED, MANIFEST):
        path = Path(folder) / name
        if path.is_file():
            try:
                record = json.loads(path.read_text(encoding="utf-8"))
            except ValueError:
                raise ResultsFolderError(f"{path} is not a manifest this grader can read: give --force to grade "
                                         "from the start") from None
            if isinstance(record, dict):
                return record
            raise ResultsFolderError(f"{path} is not a manifest this grader can read: give --force to grade "
                                     "from the start")
    return None


def earlier_part(folder: Path, planned: dict) -> tuple[set[str], dict | None]:
    """For ``grade batch --resume``: the ids ``folder`` already holds whole results of, and the record
    of the run that wrote them, once that run is shown to be ``planned`` (the same exercise, shard,
    seed, grader version, limits, backend, Gradescope visibility and class); else
    ResultsFolderError, naming every difference. A folder without results is a run not started yet."""
    from .shards import Shard, resume_differences, some

    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise ResultsFolderError(f"{folder} is a file: --out takes a folder")
    if not folder.is_dir() or not any((folder / name).exists() for name in RESULT_FILES):
        return set(), None
    record = read_run_record(folder)
    if record is None:
        raise ResultsFolderError(f"{folder} holds results of a run that recorded no manifest to resume from (an older "
                                 "grader's, or one stopped before it began): give --force to grade from the start")
    differences = resume_differences(record, planned)
    if differences:
        raise ResultsFolderError(f"{folder} holds part of another run, which --resume cannot continue with these "
                                 f"options: {'; '.join(differences)}. Give the options of that run to finish it, or "
                                 "--force to grade from the start")
    shard = Shard(planned["shard"]["k"], planned["shard"]["n"])
    share = {i for i in planned["class"] if shard.holds(i)}
    done = [identity for identity, _, _ in finished_rows(folder)]
    strays = sorted(set(done) - share)
    if strays:
        raise ResultsFolderError(f"{folder} holds verdicts of submissions that are not in this share of the class "
                                 f"({some(strays)}): give --force to grade from the start")
    return set(done), record


class Outputs:
    """Writes each result as it arrives, each file synced to the disk before the next result, so a
    batch that is killed, or a machine that stops, loses no result it had written; on closing,
    rewrites ``summary.csv`` and ``verdicts.jsonl`` sorted by id. A new ``Outputs`` first removes the
    results of an earlier run in the folder (a student graded then and not now must not keep a stale
    ``gradescope/<id>/``); ``append=True`` adds rows to the run already there, keeping only its
    whole results (``finished_rows``). ``started``, the run's ``StartedRun``, is kept current."""

    def __init__(self, folder: Path, append: bool = False, started: "StartedRun | None" = None):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.started = started
        self._rows: list[tuple[str, list, str]] = []  # (id, summary row, verdicts line)
        if append:
            self._rows = finished_rows(self.folder)
        else:
            _remove_results(self.folder, keep=(STARTED,) if started is not None else ())
        # what was there, whole, before anything is added: a line cut short must not run into the next
        replace_file(self.folder / "summary.csv", _summary_text(row for _, row, _ in self._rows))
        replace_file(self.folder / "verdicts.jsonl", "".join(line + "\n" for _, _, line in self._rows))
        self._jsonl = open(self.folder / "verdicts.jsonl", "a", encoding="utf-8")
        self._csv_file = open(self.folder / "summary.csv", "a", encoding="utf-8", newline="",
                              errors="backslashreplace")
        self._csv = csv.writer(self._csv_file)

    def write(self, result: Result, gradescope_file: bool = True) -> None:
        """Add one result's row, or nothing at all: everything that can fail (the text of the row
        and the Gradescope file) comes before the row is written."""
        from .. import __version__
        from .course import manual_points

        verdict = result.verdict
        manual = manual_points(verdict.exercise)
        record = dict(verdict.to_json(), id=result.submission.id, student=result.submission.student,
                      graded_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                      seed=verdict.context.get("seed"), grader_version=__version__, manual_points=manual)
        line = json.dumps(record)  # ASCII: a file name that is not UTF-8 is escaped, not an error
        row = [cell(printable(result.submission.id)), verdict.status, verdict.score, verdict.max_score,
               f"{result.seconds:.2f}", cell(printable(verdict.submission)), f"{manual:g}"]
        if gradescope_file:
            folder = self.folder / "gradescope" / result.submission.id
            folder.mkdir(parents=True, exist_ok=True)
            replace_file(folder / "results.json", json.dumps(gradescope(verdict), indent=1))
        if self.started is not None:
            self.started.note(verdict)
        # The row, then the line: a kill between them leaves a row without its line, which a resumed
        # run drops and grades again. A line that cannot be written takes its row back with it.
        before = self._csv_file.tell(), self._jsonl.tell()
        self._csv.writerow(row)
        _sync(self._csv_file)
        try:
            self._jsonl.write(line + "\n")
            _sync(self._jsonl)
        except BaseException:
            self._csv_file.truncate(before[0])
            self._jsonl.truncate(before[1])
            raise
        self._rows.append((result.submission.id, row, line))

    def close(self) -> None:
        self._jsonl.close()
        self._csv_file.close()
        rows = sorted(self._rows, key=lambda r: r[0])
        replace_file(self.folder / "summary.csv", _summary_text(row for _, row, _ in rows))
        replace_file(self.folder / "verdicts.jsonl", "".join(line + "\n" for _, _, line in rows))

    def __enter__(self) -> "Outputs":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _sync(handle) -> None:
    handle.flush()
    os.fsync(handle.fileno())


def gradescope(verdict) -> dict:
    """The verdict in Gradescope's autograder results.json format (``grader.integrations.platforms``), with the
    visibility ``grade batch --gradescope-visibility`` chose."""
    from .platforms import gradescope_results

    return gradescope_results(verdict)


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


def private_folders(submissions) -> list[str]:
    """The folders of a class no grading may read: each submission's own folder and, in nbgrader's
    layout, the whole course (its source notebooks, gradebook and autograded copies)."""
    folders = []
    for submission in submissions:
        path = Path(os.path.abspath(submission.path))
        folders.append(str(path.parent))
        parts = path.parts
        if "submitted" in parts[:-1]:
            folders.append(str(Path(*parts[:len(parts) - 1 - parts[::-1].index("submitted")])))
    return list(dict.fromkeys(folders))


def _start(exercise_id: str, submission: Submission, settings: Settings, workers) -> Grading:
    """Start grading one submission; a failure of the grader here is that submission's error alone."""
    try:
        return Grading(exercise_id, submission.path, settings, runner=workers)
    except Exception as exc:  # noqa: BLE001
        return Grading(exercise_id, submission.path, settings, runner=workers,
                       refusal=f"The submission could not be graded: the grader could not start it "
                               f"({type(exc).__name__}: {str(exc)[:300]}).")


def write_result(outputs: "Outputs", result: Result) -> Result:
    """Write one result; if the grader cannot, the submission's row is an error that says so (and
    has no Gradescope file if that is what failed). Only a results folder that takes no row at all
    leaves the submission out of it; the result is returned either way."""
    try:
        outputs.write(result)
        return result
    except Exception as exc:  # noqa: BLE001 - one submission's files, not the whole batch
        verdict = result.verdict
        failed = Result(result.submission, error_verdict(
            verdict.exercise, verdict.submission,
            f"The submission was graded, but the grader could not write its results ({type(exc).__name__}: "
            f"{str(exc)[:300]}).", max_points(verdict.exercise), verdict.context), result.seconds)
        for gradescope_file in (True, False):
            try:
                outputs.write(failed, gradescope_file=gradescope_file)
                break
            except Exception:  # noqa: BLE001 - the folder is unusable; the result is still returned
                continue
        return failed


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


def cut(found: Discovery, shard) -> Discovery:
    """The share ``shard`` (``grader.integrations.shards.Shard``) of what ``survey`` found, by id: every machine
    that surveys the same class cuts it the same way."""
    return replace(found, submissions=[s for s in found.submissions if shard.holds(s.id)],
                   refused=[s for s in found.refused if shard.holds(s.id)])


def class_ids(found: Discovery) -> list[str]:
    """The ids of the whole class, every row ``survey`` gives (graded or refused)."""
    return sorted(s.id for s in found.submissions + found.refused)


def finish_run(out: Path, manifest: dict, started: StartedRun | None = None) -> None:
    """Once every result of a run is written: its manifest (with the sandbox lines ``started``
    recorded, those of an interrupted part too), in place of the record of the run under way, then
    the class report drawn from the files (``grade class-report`` draws the same page from them later)."""
    from .class_report import write_report
    from .shards import write_manifest

    if started is not None:
        manifest = dict(manifest, sandbox=sorted({*(manifest.get("sandbox") or ()), *started.record["sandbox"]}))
    write_manifest(out, manifest)
    if started is not None:
        started.path.unlink(missing_ok=True)
    write_report(out)
