"""The results folder of ``grade batch``, written as verdicts arrive.

Each result is written as soon as it is known, each file synced before the next, so an interrupted
batch keeps what it finished; once the run ends the files are sorted by id. In the ``--out`` folder:
- ``verdicts.jsonl``: one JSON verdict per line (the grading contract), ``submission`` the path
  graded, plus ``id``, ``student`` (nbgrader's, or null), ``graded_at`` (UTC), ``seed``,
  ``grader_version``, ``manual_max_points`` (the most the answers graded by hand in nbgrader can
  add, which no autograded score includes: a maximum, not points awarded) and ``manual_points``,
  its earlier name, the same number;
- ``summary.csv``: id, status, score, max_score, seconds, submission, manual_points,
  manual_max_points (the last two as in ``verdicts.jsonl``; an id or path that a spreadsheet would
  run as a formula starts with an apostrophe);
- ``gradescope/<id>/results.json``: the verdict in Gradescope's results format (``grader.integrations.platforms``);
- while the run is under way, ``run.started.json`` (``StartedRun``), which ``grade batch --resume``
  checks a later run against (``earlier_part``); once the run ends, ``run.json`` (its manifest:
  exercise, shard, seed, grader version, the class's ids, the paths not graded;
  ``grader.integrations.shards``), ``report.html``, the class at a glance, and ``students/<name>.html``,
  each student's own report (``grader.integrations.class_report``).
Reading the folder back is ``grader.integrations.results``.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..api import max_points
from ..verdict import error_verdict
from .course import manual_points
from .discovery import Submission
from .results import MANIFEST, STARTED, cell, printable, replace_file


@dataclass
class Result:
    submission: Submission
    verdict: object
    seconds: float


RESULT_FILES = ("verdicts.jsonl", "summary.csv", "gradescope", STARTED, MANIFEST, "report.html", "students")
# manual_points is the earlier name of manual_max_points, kept where readers found it
SUMMARY_COLUMNS = ["id", "status", "score", "max_score", "seconds", "submission", "manual_points",
                   "manual_max_points"]


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

        verdict = result.verdict
        manual = manual_points(verdict.exercise)
        record = dict(verdict.to_json(), id=result.submission.id, student=result.submission.student,
                      graded_at=datetime.now(timezone.utc).isoformat(timespec="seconds"),
                      seed=verdict.context.get("seed"), grader_version=__version__, manual_points=manual,
                      manual_max_points=manual)
        line = json.dumps(record)  # ASCII: a file name that is not UTF-8 is escaped, not an error
        row = [cell(printable(result.submission.id)), verdict.status, verdict.score, verdict.max_score,
               f"{result.seconds:.2f}", cell(printable(verdict.submission)), f"{manual:g}", f"{manual:g}"]
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
