"""Builds the nbgrader course: one notebook per exercise, from the same solutions as the stubs.

Each notebook is written for a student who has only Jupyter and TensorFlow:
instructions made from ``exercises/<id>.md`` for the notebook (no command-line
steps), the answer cell (the solution with nbgrader's markers, which
``nbgrader generate_assignment`` turns into the stub), a read-only cell to
check the answer (the grader's full report where the grader is installed, plain
asserts to check the basics elsewhere), and one locked, graded test cell per topic
whose points are the checks' points. The hidden part of each test cell calls
``grader.notebook.assert_topic``, which only the grading machine needs and
which ends the cell with the points the topic earned, so nbgrader gives
partial credit and a notebook's autograded cells add up to ``grade``'s score.
Exercise 3 adds a manually graded written answer to the seed's question, with
its mark scheme inside the solution region: the one part of a score that
only nbgrader has.

Notebooks are deterministic (fixed cell ids, no outputs), so a committed course
can be checked for drift. ``update_course`` writes a course into a folder the
instructor may already use: it touches only the files it owns, refuses to
replace edited ones unless forced, and then keeps a backup of each.
"""

from __future__ import annotations

import ast
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from .. import exercises
from ..exercises.stubs import PROVIDED_BEGIN, expected_solution
from ..judging.declarations import declared_checks, topic_points

if TYPE_CHECKING:
    import nbformat

COURSE_ID = "transformer-chapter"
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
BACKUPS = "backups"

CONFIG = '''\
"""nbgrader configuration of the Transformer chapter course (written by `grade nbgrader-course`).

Assignments need no declaration here: `nbgrader generate_assignment exerciseN` adds each one to
gradebook.db. Release exercise5 only after exercise1 and exercise3 are due: its answer cell
carries their reference layers.
"""

import json
import logging
import os
import warnings
from pathlib import Path

# TensorFlow and Keras write to stderr (C++ logs, CUDA probing, warnings), and nbgrader gives
# 0 points to a test cell with any stderr output. The course's own test cells keep their output
# clean whatever the student's code writes; for the kernels nbgrader starts, and for test cells
# you add yourself:
# - no TensorFlow C++ logs, and no oneDNN notice;
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
# - no Python warnings (a real error is an exception, and still fails its cell);
os.environ["PYTHONWARNINGS"] = "ignore"

c = get_config()  # noqa: F821  (nbgrader provides get_config)
c.CourseDirectory.course_id = "{course_id}"
# - the kernel's file descriptors are not copied into cell outputs, and what is written to them
#   (TensorFlow's CUDA probing, printed before its log settings apply) is dropped instead of
#   reaching this console; so is the kernel's notice that it talks to nbgrader over local TCP.
c.Execute.extra_arguments = [
    "--IPKernelApp.capture_fd_output=False",
    "--IPKernelApp.exec_lines=import os; os.dup2(os.open(os.devnull, os.O_WRONLY), 2)",
    "--IPKernelApp.log_level=ERROR",
]
# Importing TensorFlow takes seconds; the first hidden test grades the whole answer.
c.Execute.timeout = {timeout}
c.ClearSolutions.code_stub = {{"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}}


class ReleasedTestCells(logging.Filter):
    """nbgrader autograde warns that the checksum of every test cell with hidden tests changed:
    gradebook.db keeps the checksum of the full cell, students get the cell without its hidden
    tests, and autograde restores the full cell either way. The warning is dropped when the
    submitted cell is exactly the released one; a test cell a student edited is still reported."""

    def __init__(self, release: Path):
        super().__init__()
        self.release = release
        self.released = None

    def filter(self, record):
        args = record.args if isinstance(record.args, tuple) else ()
        if len(args) != 4 or args[0] != "checksum" or "has changed" not in str(record.msg):
            return True
        if self.released is None:
            self.released = {{}}
            for notebook in sorted(self.release.glob("*/*.ipynb")):
                try:
                    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
                except (OSError, ValueError, KeyError):
                    continue
                for cell in cells:
                    meta = cell.get("metadata", {{}}).get("nbgrader", {{}})
                    if meta.get("grade_id") and meta.get("checksum"):
                        self.released.setdefault(meta["grade_id"], set()).add(meta["checksum"])
        _, grade_id, _, submitted = args
        return submitted not in self.released.get(grade_id, ())


logging.getLogger("AutogradeApp").addFilter(ReleasedTestCells(Path(__file__).resolve().parent / "release"))
# nbgrader's own database code warns about SQLAlchemy sessions during autograde: nothing to act on.
warnings.filterwarnings("ignore", message=r".*not in session, .* operation along .* will not proceed")
'''





def manual_points(exercise_id: str) -> float:
    """Points of the exercise's manually graded answers: in nbgrader's total, in no autograded score."""
    answer = exercises.get(exercise_id).notebook.written_answer
    return answer.points if answer else 0.0


def manual_note(exercise_id: str) -> str | None:
    """One sentence saying how nbgrader's total differs from the autograded score, or None."""
    answer = exercises.get(exercise_id).notebook.written_answer
    if answer is None:
        return None
    autograded = sum(topic_points(exercises.get(exercise_id)).values())
    return (f"In nbgrader, {exercise_id} also has a written answer worth {answer.points:g} points "
            f"({answer.grade_id}), graded by hand in formgrader: autograded scores are out of "
            f"{autograded:g}, nbgrader's total out of {autograded + answer.points:g}.")


# --------------------------------------------------------------------------- the notebook's text


class InstructionsError(ValueError):
    """An exercise's instructions cannot be turned into notebook instructions."""


WORKSPACE_ONLY = re.compile(r"`grade[ `]|exercises/|python -m|\bgrade (hint|list|init|exercise)")
# Sentences of the instructions that speak of the .py workspace, and what a notebook student reads instead.
HOW_IT_WORKS = """\
## How this notebook works

1. **Your answer** goes in the code cell below that holds `# YOUR CODE HERE`: replace each
   `raise NotImplementedError()` with your code, and keep the names and signatures that are there.
2. **Check your work** with the cell after it: run your answer cell, then that cell. It scores
   nothing. Where the grader is installed (your course's JupyterHub may have it), it shows the
   grader's full report of your answer: every check, what it observed and expected, and your
   score, as feedback, not a grade. Elsewhere its plain asserts build {what} and call it: a smoke
   test of the basics, where an error says what to fix.
3. **The test cells** that follow, one per topic of the table at the end, are locked and look
   empty: the hidden tests that grade your answer run there when your notebook is graded. Each
   cell scores the points of its checks that pass, and your feedback lists every check with
   what it observed and what it expected. Leave these cells as they are.
4. Before you hand in, restart the kernel and run all cells: your answer must run, top to
   bottom, in a fresh kernel.
"""


def notebook_instructions(exercise) -> str:
    """The exercise's instructions for a notebook student: the same text as ``exercises/<id>.md``
    without the command-line steps, how the notebook works, and what each test cell grades."""
    text = exercise.instructions.read_text(encoding="utf-8").strip()
    title, _, body = text.partition("\n\n")
    workspace, _, body = body.partition("\n\n")
    if not title.startswith("# ") or "`exercises/" not in workspace:
        raise InstructionsError(f"{exercise.instructions}: expected a title, then a paragraph on editing "
                                f"exercises/{exercise.id}.py")
    for old, new in exercise.notebook.wording:
        if old not in body:
            raise InstructionsError(f"{exercise.instructions} no longer says {old!r}: update the notebook's "
                                    f"wording in grader/exercises/{exercise.id}/spec.py")
        body = body.replace(old, new)
    what = "your model" if exercise.kind == "function" else "your layer"
    how = HOW_IT_WORKS.format(what=what)
    answer = exercise.notebook.written_answer
    if answer is not None:
        autograded = sum(topic_points(exercise).values())
        how += (f"5. **The written answer** at the end is worth {answer.points:g} points, graded by hand; "
                f"the test cells grade the other {autograded:g}.\n")
    table = tests_table(exercise)
    heading = "## What the grader looks at"
    if heading in body:  # the topics' table of the instructions becomes the test cells' table
        before, _, after = body.partition(heading)
        lines = after.lstrip("\n").splitlines()
        rest = "\n".join(lines[next((i for i, line in enumerate(lines) if not line.startswith("|")), len(lines)):])
        body = f"{before}{table}\n{rest.strip()}".rstrip()
    else:
        body = f"{body}\n\n{table}".rstrip()
    result = f"{title}\n\n{how}\n{body}\n"
    found = WORKSPACE_ONLY.search(result)
    if found:
        raise InstructionsError(f"{exercise.instructions} speaks of the command line ({found.group(0)!r}), "
                                "which notebook students do not have: reword it or add it to the notebook's wording in "
                                f"grader/exercises/{exercise.id}/spec.py")
    return result


def tests_table(exercise) -> str:
    """What each test cell grades: its topic, its points and its checks, from the check declarations."""
    declared = declared_checks(exercise)
    rows = ["## What the test cells grade", "",
            "| test cell | points | checks |", "|---|---:|---|"]
    for topic, points in topic_points(exercise).items():
        titles = "; ".join(d["title"].replace("|", "\\|") for d in declared if d["topic"] == topic)
        rows.append(f"| {topic} | {points:g} | {titles} |")
    rows.append(f"| **all** | **{sum(topic_points(exercise).values()):g}** | |")
    return "\n".join(rows) + "\n"


def notebook_answer(exercise) -> str:
    """The answer cell: the solution (its markers kept for nbgrader) without the module docstring,
    which tells ``grade`` users where their files are; the instructions cell says it all."""
    source = expected_solution(exercise)
    tree = ast.parse(source)
    first = tree.body[0] if tree.body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
        source = "".join(source.splitlines(keepends=True)[first.end_lineno:])
    if exercise.provided:
        earlier = " and ".join(exercise.provided)
        source = re.sub(rf"^{re.escape(PROVIDED_BEGIN)}.*$",
                        f"{PROVIDED_BEGIN}: the reference layers of {earlier}, ready to use (do not edit)",
                        source, count=1, flags=re.MULTILINE)
    return source.strip("\n")


# --------------------------------------------------------------------------- the notebook


def _nbgrader(grade_id: str, *, solution: bool, grade: bool, locked: bool, points: float | None = None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def build_notebook(exercise) -> nbformat.NotebookNode:
    import nbformat  # here, not at the top: a batch asks this module for manual points only

    notebook = nbformat.v4.new_notebook()
    notebook.metadata = {"kernelspec": KERNELSPEC, "language_info": {"name": "python"}}
    cells = [
        nbformat.v4.new_markdown_cell(notebook_instructions(exercise).rstrip("\n")),
        nbformat.v4.new_code_cell(
            notebook_answer(exercise),
            metadata=_nbgrader(f"{exercise.id}-answer", solution=True, grade=False, locked=False),
        ),
        nbformat.v4.new_code_cell(
            exercise.notebook.check_cell(exercise.id),
            metadata=_nbgrader(f"{exercise.id}-check", solution=False, grade=False, locked=True),
        ),
    ]
    for topic, points in topic_points(exercise).items():
        source = (
            f"# Tests: {topic} ({points:g} points). The hidden tests of this topic run here when your\n"
            "# notebook is graded: leave this cell as it is.\n"
            "### BEGIN HIDDEN TESTS\n"
            "from grader.notebook import assert_topic\n"
            f'assert_topic("{exercise.id}", "{topic}")\n'
            "### END HIDDEN TESTS"
        )
        cells.append(nbformat.v4.new_code_cell(
            source, metadata=_nbgrader(f"{exercise.id}-{topic}", solution=False, grade=True, locked=True,
                                       points=points)))
    answer = exercise.notebook.written_answer
    if answer is not None:
        cells.append(nbformat.v4.new_markdown_cell(answer.question.rstrip("\n")))
        cells.append(nbformat.v4.new_markdown_cell(
            answer.model_answer.rstrip("\n"),
            metadata=_nbgrader(answer.grade_id, solution=True, grade=True, locked=False, points=answer.points),
        ))
    for index, cell in enumerate(cells):
        cell.id = f"{exercise.id}-{index:02d}"
    notebook.cells = cells
    nbformat.validate(notebook)
    return notebook


def config_text(timeout: int = 300) -> str:
    return CONFIG.format(course_id=COURSE_ID, timeout=timeout)


# --------------------------------------------------------------------------- the course folder


def course_files(exercise_ids: list[str] | None = None) -> dict[Path, bytes]:
    """What a course of these exercises (default: all) consists of: {path in the course: content}."""
    import nbformat

    chosen = [exercises.get(i) for i in (exercise_ids or list(exercises.EXERCISES))]
    files = {Path("nbgrader_config.py"): config_text().encode("utf-8")}
    for exercise in chosen:
        text = nbformat.writes(build_notebook(exercise)) + "\n"
        files[Path("source") / exercise.id / f"{exercise.id}.ipynb"] = text.encode("utf-8")
    return files


def write_course(folder: Path, exercise_ids: list[str] | None = None) -> list[Path]:
    """Write ``nbgrader_config.py`` and ``source/<id>/<id>.ipynb`` for these exercises (default: all),
    replacing what is there; ``update_course`` is the careful version."""
    folder = Path(folder)
    written = []
    for relative, data in course_files(exercise_ids).items():
        path = folder / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        written.append(path)
    return written


def release_notes(exercise_ids: list[str] | None = None) -> list[str]:
    """What instructors must know about releasing these exercises."""
    chosen = exercise_ids or list(exercises.EXERCISES)
    return [f"Release {later} only after {' and '.join(earlier)} are due: its answer cell carries their "
            f"reference layers (their full solutions)."
            for later, earlier in ((e, exercises.get(e).provided) for e in chosen) if earlier]


class CourseError(Exception):
    """The course cannot be written where asked; the message says why and what to do."""


@dataclass
class CourseUpdate:
    written: list[Path] = field(default_factory=list)
    unchanged: list[Path] = field(default_factory=list)
    backups: list[tuple[Path, Path]] = field(default_factory=list)  # (replaced file, its backup)
    notes: list[str] = field(default_factory=list)


def update_course(folder: Path, exercise_ids: list[str] | None = None, force: bool = False) -> CourseUpdate:
    """Write the course's files into ``folder``, leaving every other file alone (other assignments,
    notebooks of your own). A file of the course that exists with other content is replaced only
    with ``force``, after a copy of it is kept in ``folder/backups/<time>/``."""
    folder = Path(folder).resolve()
    if folder.exists() and not folder.is_dir():
        raise CourseError(f"{folder} is a file, not a folder: give the course folder (it is created if missing)")
    files = course_files(exercise_ids)
    update = CourseUpdate(notes=release_notes(exercise_ids))
    differing = []
    for relative, data in files.items():
        target = folder / relative
        if target.is_dir() or any(p.exists() and not p.is_dir() for p in list(target.parents)[:len(relative.parts) - 1]):
            raise CourseError(f"{target} cannot be written: a folder or a file is in its place")
        if target.is_file() and target.read_bytes() == data:
            update.unchanged.append(target)
        elif target.exists():
            differing.append(target)
    if differing and not force:
        raise CourseError("these files exist and differ from what would be written: "
                          + ", ".join(str(p) for p in differing)
                          + ". Use --force to replace them (a copy of each is kept in "
                          f"{folder / BACKUPS}/), or --exercises to write only the others.")
    if differing:
        backup = _backup_folder(folder)
        for target in differing:
            copy = backup / target.relative_to(folder)
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(target, copy)
            update.backups.append((target, copy))
    for relative, data in files.items():
        target = folder / relative
        if target in update.unchanged:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        update.written.append(target)
    return update


def _backup_folder(folder: Path) -> Path:
    """A new ``backups/<time>`` folder: outside ``source/``, so no backup is ever released."""
    stamp = time.strftime("%Y-%m-%dT%H-%M-%S")
    candidate, count = folder / BACKUPS / stamp, 1
    while candidate.exists():
        count += 1
        candidate = folder / BACKUPS / f"{stamp}-{count}"
    candidate.mkdir(parents=True)
    return candidate
