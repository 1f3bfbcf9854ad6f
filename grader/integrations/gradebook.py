"""Scores of a batch into an nbgrader course, through nbgrader's own autograde.

``grade batch --gradebook COURSE`` has graded each notebook already (in a
forked child, as ``grade`` does). Here nbgrader's ``Autograde`` converter runs
for each student with one step swapped: instead of ``Execute``, which would
start a kernel and run the notebook again, ``VerdictOutputs`` gives every test
cell the output its hidden tests give in a real run, taken from the verdict:
the check lines, then the points the topic earned (nbgrader's partial credit)
or, for a topic that earned nothing, the AssertionError. Everything else is
nbgrader's: the submission is sanitised (locked cells restored), scores are
saved cell by cell, late penalties applied and the autograded notebook written
to ``autograded/<student>/<assignment>/``. ``nbgrader export``,
``nbgrader generate_feedback`` and formgrader then work as after
``nbgrader autograde``.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from .. import exercises
from ..notebook import failure_traceback, printed, topic_report
from ..judging.declarations import topic_points


class CellCannotBeScored(Exception):
    """A test cell that no topic of the exercise answers for."""


@dataclass
class Stored:
    students: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (student or id, why): not the course's notebook
    failed: list[tuple[str, str]] = field(default_factory=list)  # (student, why): nbgrader's autograde failed

    @property
    def complete(self) -> bool:
        """Every result was stored."""
        return not self.skipped and not self.failed


def topic_outputs(verdict, topic: str) -> list:
    """The outputs a test cell of ``topic`` shows after ``assert_topic`` ran on this verdict: the
    lines it prints, then the points it returns (nbgrader's partial credit) or the error it raises."""
    import nbformat

    lines, failure, points = topic_report(verdict, topic)
    outputs = []
    if lines:
        outputs.append(nbformat.v4.new_output("stream", name="stdout", text=printed(lines) + "\n"))
    if failure is not None:
        outputs.append(nbformat.v4.new_output("error", ename="AssertionError", evalue=failure,
                                              traceback=failure_traceback(failure)))
    else:
        outputs.append(nbformat.v4.new_output("execute_result", data={"text/plain": repr(points)},
                                              execution_count=None))
    return outputs


def _verdict_outputs_class():
    from nbgrader.preprocessors import NbGraderPreprocessor
    from traitlets import Any, List, Unicode

    class VerdictOutputs(NbGraderPreprocessor):
        """Stands in for nbgrader's Execute: the test cells get their outputs from a verdict."""

        exercise_id = Unicode()
        topics = List(Unicode())
        verdict = Any()

        def preprocess_cell(self, cell, resources, index):
            meta = cell.metadata.get("nbgrader", {})
            grade_id = meta.get("grade_id")  # OverwriteCells removed it from cells the gradebook lacks
            # an autograder test cell in nbgrader's sense; a graded answer cell is marked by hand
            if cell.cell_type == "code" and meta.get("grade") and not meta.get("solution") and grade_id:
                topic = grade_id.removeprefix(f"{self.exercise_id}-")
                if topic not in self.topics:
                    raise CellCannotBeScored(f"test cell {grade_id!r} is not one of {self.exercise_id}'s topics "
                                             f"({', '.join(self.topics)}); only nbgrader autograde can score it")
                cell.outputs = topic_outputs(self.verdict, topic)
            return cell, resources

    return VerdictOutputs


def course_config(course: Path, exercise_id: str):
    """The course's nbgrader configuration, once the course is known to be ready for ``store``:
    it has a gradebook holding the assignment, and an autograde with an Execute step to stand in for.
    Raises FileNotFoundError or LookupError saying what to run first."""
    from nbgrader.api import Gradebook, MissingEntry
    from traitlets.config import Config
    from traitlets.config.loader import PyFileConfigLoader

    course = Path(course).resolve()
    database = course / "gradebook.db"
    if not database.is_file():
        raise FileNotFoundError(f"{database} does not exist: run nbgrader generate_assignment {exercise_id} "
                                f"in {course} first")
    config = Config()
    if (course / "nbgrader_config.py").is_file():
        # The course's config sets environment variables and warning filters for the kernels nbgrader
        # starts; no kernel starts here, and this process keeps its own.
        environment = dict(os.environ)
        try:
            with warnings.catch_warnings():
                config.merge(PyFileConfigLoader("nbgrader_config.py", path=str(course)).load_config())
        finally:
            os.environ.clear()
            os.environ.update(environment)
    config.CourseDirectory.root = str(course)
    with Gradebook(f"sqlite:///{database}", config.CourseDirectory.get("course_id", "default_course")) as gradebook:
        try:
            gradebook.find_notebook(exercise_id, exercise_id)
        except MissingEntry:
            raise LookupError(f"the gradebook has no notebook {exercise_id} in assignment {exercise_id}: "
                              f"run nbgrader generate_assignment {exercise_id} in {course} first") from None
    if not any(_is_execute(step) for step in _autograde_steps(config)):
        raise LookupError("the course's Autograde.autograde_preprocessors has no Execute step to stand in for")
    return config


def _autograde_steps(config) -> list:
    """The preprocessors nbgrader autograde runs after sanitising, as this course configures them."""
    from nbgrader.converters import Autograde

    return list(config.Autograde.get("autograde_preprocessors",
                                     Autograde.class_traits()["autograde_preprocessors"].default()))


def _is_execute(step) -> bool:
    from nbgrader.preprocessors import Execute

    return isinstance(step, type) and issubclass(step, Execute)


def store(course: Path, exercise_id: str, results, on_student=None) -> Stored:
    """Autograde, in nbgrader's sense, each result whose submission is the notebook
    ``COURSE/submitted/<student>/<exercise>/<exercise>.ipynb`` of its student, using its verdict;
    list the others with the reason. The course must be ready (``course_config``)."""
    from nbgrader.apps.api import NbGraderAPI
    from nbgrader.coursedir import CourseDirectory
    from sqlalchemy.exc import SAWarning

    course = Path(course).resolve()
    config = course_config(course, exercise_id)
    steps = _autograde_steps(config)
    topics = list(topic_points(exercises.get(exercise_id)))
    verdict_outputs = _verdict_outputs_class()
    stored = Stored()
    for result in results:
        submission = result.submission
        student = getattr(submission, "student", None)
        why = _not_storable(course, exercise_id, submission) or unstorable_id(student)
        if why is not None:
            stored.skipped.append((student or submission.id, why))
        else:
            step = verdict_outputs(exercise_id=exercise_id, topics=topics, verdict=result.verdict)
            config.Autograde.autograde_preprocessors = [step if _is_execute(s) else s for s in steps]
            api = NbGraderAPI(coursedir=CourseDirectory(config=config), config=config)
            with warnings.catch_warnings():
                # nbgrader's own SQLAlchemy usage warns about session autoflush; nothing for the instructor
                warnings.simplefilter("ignore", SAWarning)
                outcome = api.autograde(exercise_id, student, force=True, create=True)
            if outcome.get("success"):
                stored.students.append(student)
            else:
                stored.failed.append((student, _why(outcome)))
        if on_student is not None:
            on_student(student or submission.id)
    _read_back(course, config, exercise_id, results, stored)
    return stored


# Characters nbgrader reads as a pattern (it globs a student id into paths) or as a path; control characters.
_PATTERN = set("*?[]")
_PATH = set("/\\")


def unstorable_id(student: str | None) -> str | None:
    """Why nbgrader's gradebook cannot be trusted with this student id, or None: nbgrader uses an id as
    a glob pattern and as a folder name, so ``alice*`` would autograde, and overwrite, alice."""
    if student is None:
        return None
    text = student.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    problems = []
    if _PATTERN & set(student):
        problems.append("it holds a character nbgrader reads as a pattern (* ? [ ])")
    if _PATH & set(student) or student in (".", "..") or not student.strip():
        problems.append("it is not a folder name of its own")
    if any(ord(c) < 32 or ord(c) == 127 for c in student) or text != student:
        problems.append("it holds control characters or bytes that are not text")
    if not problems:
        return None
    return f"this id cannot be stored in nbgrader's gradebook: {'; '.join(problems)}. Rename the student's folder"


def _read_back(course: Path, config, exercise_id: str, results, stored: Stored) -> None:
    """Read every stored score back from the gradebook; a student whose score there is not the
    verdict's moves from ``stored.students`` to ``stored.failed``."""
    from nbgrader.api import Gradebook, MissingEntry

    verdicts = {getattr(r.submission, "student", None): r.verdict for r in results}
    database = f"sqlite:///{Path(course) / 'gradebook.db'}"
    kept = []
    with Gradebook(database, config.CourseDirectory.get("course_id", "default_course")) as gradebook:
        for student in stored.students:
            try:
                held = float(gradebook.find_submission(exercise_id, student).code_score)
            except MissingEntry:
                stored.failed.append((student, "nbgrader reported it stored, but the gradebook holds no score"))
                continue
            expected = float(verdicts[student].score)
            if abs(held - expected) > 1e-6:
                stored.failed.append((student, f"the gradebook holds {held:g} points where the verdict gives "
                                               f"{expected:g}: check this student in formgrader"))
            else:
                kept.append(student)
    stored.students = kept


def _not_storable(course: Path, exercise_id: str, submission) -> str | None:
    """Why nbgrader cannot autograde this submission in ``course``, or None."""
    path = Path(submission.path)
    if getattr(submission, "refused", None):
        return f"{path} {submission.refused}: it was not read"
    student = getattr(submission, "student", None)
    if student is None:
        return f"{path} is not in {course / 'submitted'}/<student>/{exercise_id}/"
    expected = course / "submitted" / student / exercise_id / f"{exercise_id}.ipynb"
    linked = [p for p in (expected, *expected.parents) if p.is_relative_to(course / "submitted") and p.is_symlink()]
    if linked:
        return f"{linked[-1]} is a symbolic link: nbgrader would read what it points to"
    if path.resolve() != expected:
        return f"{path} is not {expected}, the notebook nbgrader autogrades"
    return None


def _why(outcome: dict) -> str:
    """The reason nbgrader's log gives (the converter re-raises every failure as one generic error)."""
    text = "\n".join(str(outcome.get(key) or "") for key in ("log", "error"))
    marker = f"{CellCannotBeScored.__name__}: "
    for line in text.splitlines():
        if marker in line:
            return line.split(marker, 1)[1].strip()
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else "nbgrader autograde failed"
