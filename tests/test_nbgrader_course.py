"""The nbgrader course, end to end with the real nbgrader: a term's course with several assignments and
stray files; release, submit, `nbgrader autograde`, `grade batch --gradebook`, feedback and export.
One submission, one score, on every path."""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import nbformat
import pytest

from grader import cli, exercises
from grader.integrations.course import build_notebook, notebook_instructions, update_course, write_course

from .conftest import grade_warm
from grader.judging.declarations import topic_points

SOLUTION = exercises.get("exercise3").solution.read_text(encoding="utf-8")
# The book's encoder: no supports_masking, so one 1-point check of the 6-point mask topic fails.
BOOK = SOLUTION.replace("        self.supports_masking = True\n", "")
# A correct encoder that writes to stderr every way a student's code does.
NOISY = "import logging, sys, warnings\nwarnings.simplefilter('default')\n\n" + SOLUTION.replace(
    "        proj_input = self.layernorm_1(inputs + attention_output)\n",
    "        logging.warning('encoding a batch of %d', inputs.shape[0])\n"
    "        print('debug: attention done', file=sys.stderr)\n"
    "        warnings.warn('a warning from the answer')\n"
    "        proj_input = self.layernorm_1(inputs + attention_output)\n")
# dave also keeps a helper of his own in a cell he added before the answer cell
HELPER_CELL = "import keras\n\n\ndef expand_keys(mask):\n    return keras.ops.expand_dims(mask, axis=1)\n"
NOISY_WITH_HELPER = NOISY.replace("mask = keras.ops.expand_dims(mask, axis=1)", "mask = expand_keys(mask)")
SHARED_NORM = SOLUTION.replace("self.layernorm_2 = layers.LayerNormalization()", "self.layernorm_2 = self.layernorm_1")
AUTOGRADED_POINTS = sum(topic_points(exercises.get("exercise3")).values())


def _mistake(exercise_id: str, name: str) -> str:
    from .catalog import catalog

    return next(m.source for m in catalog(exercise_id)[0] if m.name == name)


# Partly right answers the released "Check your work" cell rejects: the check fails in the kernel,
# and the answer keeps the points a .py file of it earns.
RETURNS_A_TUPLE = _mistake("exercise3", "returns_a_tuple")
NO_COMPUTE_MASK = _mistake("exercise1", "no_compute_mask")
WRITTEN = "exercise3-why-two-norms"
STUDENTS = ("alice", "bob", "carol", "dave", "frank")
TEST_CELLS = [f"exercise3-{topic}" for topic in topic_points(exercises.get("exercise3"))]


def nbgrader(course: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    for name in ("TF_CPP_MIN_LOG_LEVEL", "PYTHONWARNINGS", "TF_ENABLE_ONEDNN_OPTS"):
        env.pop(name, None)  # as an instructor's shell would be: the course config must cope
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, capture_output=True,
                            text=True, env=env, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def submit(course: Path, student: str, answer: str | None, written: str | None = None,
           assignment: str = "exercise3", edit_test_cell: bool = False, own_cell: str | None = None) -> Path:
    """Copy the released notebook into submitted/<student>/<assignment>/, with the answer cells filled in
    (and ``own_cell``, a code cell the student added, just before the answer cell)."""
    notebook = nbformat.read(course / "release" / assignment / f"{assignment}.ipynb", as_version=4)
    if own_cell is not None:
        answer_at = next(i for i, c in enumerate(notebook.cells)
                         if c.cell_type == "code" and c.metadata.get("nbgrader", {}).get("solution"))
        notebook.cells.insert(answer_at, nbformat.v4.new_code_cell(own_cell))
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code" and answer is not None:
            cell.source = answer
        if meta.get("solution") and cell.cell_type == "markdown" and written is not None:
            cell.source = written
        if edit_test_cell and meta.get("grade_id") == "exercise3-api":
            cell.source += "\npass"
    path = course / "submitted" / student / assignment / f"{assignment}.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path


def scores(course: Path, students=STUDENTS) -> dict[str, dict[str, float]]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        return {student: {g.name: g.score for notebook in gradebook.find_submission("exercise3", student).notebooks
                          for g in notebook.grades}
                for student in students}


def autograded(grades: dict[str, float]) -> float:
    return sum(score for name, score in grades.items() if name != WRITTEN)


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    """A course as an instructor runs it: another notebook of the instructor's in source/, exercise3
    and exercise1 released, five students of exercise3 (the solution with a written answer, the
    book's encoder, the stub with a test cell edited, a correct answer that writes to stderr, a
    partly right answer the check cell rejects beside a failing check of the student's own), alice's
    exercise1 (partly right, rejected by its check cell) and bob's notes lying around; a copy taken
    before autograde, and then `nbgrader autograde` of both assignments."""
    root = tmp_path_factory.mktemp("term")
    course = root / "course"
    own = course / "source" / "week0" / "week0.ipynb"
    own.parent.mkdir(parents=True)
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Welcome")]), own)
    update_course(course)
    generate = nbgrader(course, "generate_assignment", "exercise3")
    nbgrader(course, "generate_assignment", "exercise1")
    submit(course, "alice", SOLUTION, "Each norm learns its own gamma and beta, fitted to its own inputs.")
    submit(course, "alice", NO_COMPUTE_MASK, assignment="exercise1")
    submit(course, "bob", BOOK)
    (course / "submitted" / "bob" / "notes.py").write_text("# what to ask in class\n", encoding="utf-8")
    submit(course, "carol", None, edit_test_cell=True)
    submit(course, "dave", NOISY_WITH_HELPER, own_cell=HELPER_CELL)
    submit(course, "frank", RETURNS_A_TUPLE, own_cell="assert False, 'a check of my own'")
    pristine = root / "pristine"  # its gradebook holds the assignments and no submission
    shutil.copytree(course, pristine)
    autograde = nbgrader(course, "autograde", "exercise3", "--create")
    nbgrader(course, "autograde", "exercise1", "--create")
    return SimpleNamespace(course=course, pristine=pristine, own=own,
                           logs=generate.stdout + generate.stderr + autograde.stdout + autograde.stderr)


@pytest.fixture(scope="module")
def batch(term, tmp_path_factory):
    """`grade batch COURSE --gradebook COURSE` on the copy taken before autograde, where executing a
    notebook would fail, with two more students nbgrader cannot store: erin handed in a .py file,
    mallory a link to someone else's file."""
    root = tmp_path_factory.mktemp("batch")
    course = root / "course"
    shutil.copytree(term.pristine, course, symlinks=True)
    with open(course / "nbgrader_config.py", "a", encoding="utf-8") as config:
        config.write('\nc.Execute.kernel_name = "no-such-kernel"  # executing a notebook would fail\n')
    (course / "submitted" / "erin" / "exercise3").mkdir(parents=True)
    (course / "submitted" / "erin" / "exercise3" / "exercise3.py").write_text(SOLUTION, encoding="utf-8")
    (course / "submitted" / "mallory" / "exercise3").mkdir(parents=True)
    (course / "submitted" / "mallory" / "exercise3" / "exercise3.ipynb").symlink_to(
        term.course / "submitted" / "alice" / "exercise3" / "exercise3.ipynb")
    out = root / "out"
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", COLUMNS="200")
    result = subprocess.run([sys.executable, "-m", "grader", "batch", str(course), "--exercise", "exercise3",
                             "--out", str(out), "--gradebook", str(course)],
                            capture_output=True, text=True, env=env, timeout=900)
    return SimpleNamespace(course=course, out=out, result=result)


# --------------------------------------------------------------------------- one student, in the default tier


def test_one_student_autograded_by_nbgrader_scores_as_grade_does(tmp_path):
    """The shortest whole path: the course written, the assignment released, one notebook with the
    book's encoder submitted, `nbgrader autograde` run for real; the gradebook holds grade's score,
    cell by cell. (The slow tier runs a whole term's course: several students, batch, feedback.)"""
    course = tmp_path / "course"
    update_course(course)
    nbgrader(course, "generate_assignment", "exercise3")
    path = submit(course, "bob", BOOK)
    nbgrader(course, "autograde", "exercise3", "--create")
    verdict = grade_warm("exercise3", path)
    got = scores(course, ("bob",))["bob"]
    assert verdict.score == AUTOGRADED_POINTS - 1 and autograded(got) == verdict.score
    for topic, points in topic_points(exercises.get("exercise3")).items():
        assert points == sum(c.max_points for c in verdict.checks if c.topic == topic), topic
        assert got[f"exercise3-{topic}"] == sum(c.points for c in verdict.checks if c.topic == topic), topic


# --------------------------------------------------------------------------- release


@pytest.mark.slow
def test_release_is_written_for_notebook_students_and_hides_the_grading(term):
    released = (term.course / "release" / "exercise3" / "exercise3.ipynb").read_text(encoding="utf-8")
    for secret in ("BEGIN SOLUTION", "HIDDEN TESTS", "assert_topic", "grader.notebook", "Mark scheme",
                   "self.layernorm_2 = layers.LayerNormalization()", "config.update("):
        assert secret not in released
    for workspace_only in ("grade exercise3", "exercises/exercise3", "grade hint"):
        assert workspace_only not in released
    assert "raise NotImplementedError()" in released and "YOUR ANSWER HERE" in released
    assert "Check your work" in released and "What the test cells grade" in released
    assert 'from grader import check' in released and 'check(\\"exercise3\\")' in released  # the check cell
    assert "graded by hand" in released
    assert term.own.read_text(encoding="utf-8").count("Welcome") == 1  # the instructor's notebook, untouched


@pytest.mark.slow
def test_nbgrader_commands_are_quiet(term):
    """No unknown option, no SQLAlchemy or TensorFlow noise, no checksum alarm for test cells
    submitted as released; the one test cell a student edited is still reported."""
    for noise in ("db_assignments", "not recognized", "SAWarning", "absl", "cuda", "without encryption",
                  "Traceback"):
        assert noise not in term.logs, noise
    checksums = re.findall(r"Attribute 'checksum' for cell (\S+) has changed", term.logs)
    assert checksums == ["exercise3-api"]  # carol's edit, and nobody else's


# --------------------------------------------------------------------------- one score


@pytest.fixture(scope="module")
def bob_verdict(term):
    return grade_warm("exercise3", term.course / "submitted" / "bob" / "exercise3" / "exercise3.ipynb")


@pytest.mark.slow
def test_autograde_gives_partial_credit_equal_to_grades_score(term, bob_verdict):
    result = scores(term.course)
    assert autograded(result["alice"]) == AUTOGRADED_POINTS
    assert autograded(result["carol"]) == 0
    # the book's encoder loses one 1-point check: the mask cell keeps the rest of its points
    assert bob_verdict.score == AUTOGRADED_POINTS - 1
    assert autograded(result["bob"]) == bob_verdict.score
    assert result["bob"]["exercise3-mask"] == topic_points(exercises.get("exercise3"))["mask"] - 1
    # the written answer stays nbgrader's, to grade by hand
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{term.course / 'gradebook.db'}") as gradebook:
        assert gradebook.find_submission("exercise3", "alice").needs_manual_grade


@pytest.mark.slow
@pytest.mark.parametrize("student, assignment, answer", [("frank", "exercise3", RETURNS_A_TUPLE),
                                                          ("alice", "exercise1", NO_COMPUTE_MASK)])
def test_a_partly_right_answer_the_check_cell_rejects_scores_in_nbgrader_as_its_python_file(
        term, tmp_path, student, assignment, answer):
    """The check cell's plain asserts reject the answer; nbgrader ran the check cell where the grader is
    installed, so it showed the grader's report of the answer instead, with the score the test cells
    add up to. The hidden tests grade the answer, not the check: every test cell holds the points of
    its topic in the .py file's verdict."""
    from nbgrader.api import Gradebook

    notebook = nbformat.read(term.course / "autograded" / student / assignment / f"{assignment}.ipynb",
                             as_version=4)
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in notebook.cells}
    python = tmp_path / f"{assignment}.py"
    python.write_text(answer, encoding="utf-8")
    verdict = grade_warm(assignment, python)
    assert verdict.status == "failed" and 0 < verdict.score < verdict.max_score
    check = cells[f"{assignment}-check"].outputs
    assert [o.output_type for o in check] == ["stream", "display_data"]  # no error, no stderr
    assert f"Score {verdict.score:g}/{verdict.max_score:g}" in check[1].data["text/plain"]
    with Gradebook(f"sqlite:///{term.course / 'gradebook.db'}") as gradebook:
        got = {g.name: g.score for nb in gradebook.find_submission(assignment, student).notebooks for g in nb.grades}
    assert autograded(got) == verdict.score
    for topic in topic_points(exercises.get(assignment)):
        assert got[f"{assignment}-{topic}"] == sum(c.points for c in verdict.checks if c.topic == topic), topic


@pytest.mark.slow
def test_a_failed_test_cell_shows_its_message_first_wrapped_and_no_traceback(term):
    """In nbgrader's autograded notebook (and so in its feedback): carol's stub earned nothing, so every
    test cell failed; its error is the message alone, at most WIDTH columns a line."""
    from grader.notebook import WIDTH

    notebook = nbformat.read(term.course / "autograded" / "carol" / "exercise3" / "exercise3.ipynb", as_version=4)
    errors = [o for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") in TEST_CELLS
              for o in c.outputs if o.output_type == "error"]
    assert len(errors) == len(TEST_CELLS)
    for error in errors:
        shown = "\n".join(error.traceback)
        assert error.traceback[0] and error.evalue.startswith(error.traceback[0])  # the message, from its start
        assert "Traceback" not in shown and "grader/notebook.py" not in shown and "Cell In" not in shown
        assert max(len(line) for line in error.traceback) <= WIDTH


@pytest.mark.slow
def test_a_correct_answer_that_writes_to_stderr_loses_nothing(term):
    """dave's answer writes to stderr, and uses a helper defined in a cell of his own: nbgrader runs
    that cell, so the grader does too. The check cell, where the grader is installed, grades the answer
    in the grader's own process, which keeps what the answer writes out of the cell: it shows the full
    report and nothing on stderr."""
    assert autograded(scores(term.course)["dave"]) == AUTOGRADED_POINTS
    notebook = nbformat.read(term.course / "autograded" / "dave" / "exercise3" / "exercise3.ipynb", as_version=4)
    cells = {c.metadata.get("nbgrader", {}).get("grade_id"): c for c in notebook.cells}
    check = cells["exercise3-check"].outputs
    assert [o.output_type for o in check] == ["stream", "display_data"] and check[0].name == "stdout"
    assert f"Score {AUTOGRADED_POINTS:g}/{AUTOGRADED_POINTS:g}" in check[1].data["text/plain"]


@pytest.mark.slow
def test_no_test_cell_has_stderr_output(term):
    for student in STUDENTS:
        notebook = nbformat.read(term.course / "autograded" / student / "exercise3" / "exercise3.ipynb", as_version=4)
        for cell in notebook.cells:
            if cell.metadata.get("nbgrader", {}).get("grade_id") in TEST_CELLS:
                assert not any(o.get("name") == "stderr" for o in cell.outputs), (student, cell.outputs)


@pytest.mark.slow
def test_grading_the_notebook_directly_agrees_with_the_python_file(bob_verdict, tmp_path):
    py = tmp_path / "bob.py"
    py.write_text(BOOK, encoding="utf-8")
    python_verdict = grade_warm("exercise3", py)
    assert [(c.id, c.status, c.points) for c in bob_verdict.checks] == \
        [(c.id, c.status, c.points) for c in python_verdict.checks]


# --------------------------------------------------------------------------- grade batch --gradebook


@pytest.mark.slow
def test_batch_grades_the_course_and_stores_the_same_scores_as_autograde(term, batch):
    printed = batch.result.stdout
    assert batch.result.returncode == 2, printed[-3000:] + batch.result.stderr[-3000:]  # two not stored
    assert f"{batch.course} is an nbgrader course: grading the exercise3 submissions in {batch.course / 'submitted'}" \
        in printed
    assert f"{batch.course / 'submitted' / 'alice' / 'exercise1'}: another assignment (exercise1)" in printed
    assert f"{batch.course / 'submitted' / 'bob' / 'notes.py'}: not in an assignment folder of bob" in printed
    erin = batch.course / "submitted" / "erin" / "exercise3"
    assert f"Not stored for erin: {erin / 'exercise3.py'} is not {erin / 'exercise3.ipynb'}" in printed
    assert f"Not stored for mallory: {batch.course / 'submitted' / 'mallory' / 'exercise3' / 'exercise3.ipynb'} " \
           "is a symbolic link: it was not read" in printed
    assert "Autograded 5 student(s)" in printed and "2 result(s) are not in the gradebook" in printed
    assert "written answer worth 2 points" in printed and "give that maximum as manual_max_points" in printed
    assert batch.result.stderr.strip() == ""
    stored = scores(batch.course)
    assert stored == scores(term.course)
    assert autograded(stored["dave"]) == AUTOGRADED_POINTS  # the answer that writes to stderr
    assert autograded(stored["carol"]) == 0  # the stub


def _cell_outputs(notebook_path: Path) -> dict[str, list]:
    """Each test cell's outputs without what may differ between two gradings of one answer: the
    numbers inside failure messages (drawn from each run's seed) and execution counts."""
    notebook = nbformat.read(notebook_path, as_version=4)
    found = {}
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id not in TEST_CELLS:
            continue
        outputs = []
        for output in cell.outputs:
            if output.output_type == "stream":
                kept = [line for line in output.text.splitlines()
                        if line[:1] in "✓✗" or re.fullmatch(r"\w+: [\d.]+ of [\d.]+ points", line)]
                if outputs and outputs[-1][:2] == ("stream", output.name):  # one stream, however the kernel sent it
                    kept = outputs.pop()[2] + kept
                outputs.append(("stream", output.name, kept))
            elif output.output_type == "execute_result":
                outputs.append(("execute_result", output.data["text/plain"]))
            else:
                outputs.append((output.output_type, output.get("ename"), output.get("evalue", "").split("\n")[0]))
        found[grade_id] = outputs
    return found


@pytest.mark.slow
def test_batch_gives_each_test_cell_the_outputs_autograde_gives(term, batch):
    for student in STUDENTS:
        executed = _cell_outputs(term.course / "autograded" / student / "exercise3" / "exercise3.ipynb")
        from_verdicts = _cell_outputs(batch.course / "autograded" / student / "exercise3" / "exercise3.ipynb")
        assert from_verdicts == executed, student
    bob = _cell_outputs(batch.course / "autograded" / "bob" / "exercise3" / "exercise3.ipynb")
    assert bob["exercise3-mask"][-1] == ("execute_result", "5.0") and "mask: 5 of 6 points" in bob["exercise3-mask"][0][2]


@pytest.mark.slow
def test_batch_results_folder_is_complete_and_agrees_with_the_gradebook(term, batch):
    summary = list(csv.DictReader((batch.out / "summary.csv").open(encoding="utf-8")))
    assert [r["id"] for r in summary] == ["alice", "bob", "carol", "dave", "erin", "frank", "mallory"]
    gradebook = scores(term.course)
    for row in summary[:4]:
        assert float(row["score"]) == autograded(gradebook[row["id"]]), row
        assert row["manual_max_points"] == row["manual_points"] == "2"
    assert float(summary[5]["score"]) == autograded(gradebook["frank"]) and summary[6]["status"] == "error"
    lines = [json.loads(line) for line in (batch.out / "verdicts.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [line["id"] for line in lines] == [r["id"] for r in summary]
    assert all(isinstance(line["seed"], int) for line in lines[:5]) and lines[0]["student"] == "alice"
    assert sorted(p.name for p in (batch.out / "gradescope").iterdir()) == [r["id"] for r in summary]


@pytest.mark.slow
def test_export_and_feedback_work_after_batch(batch):
    export = nbgrader(batch.course, "export")
    exported = (batch.course / "grades.csv").read_text(encoding="utf-8")
    assert "alice" in exported and "bob" in exported
    feedback_run = nbgrader(batch.course, "generate_feedback", "exercise3")
    for run in (export, feedback_run):
        assert "WARNING" not in run.stdout + run.stderr, run.stdout + run.stderr
    feedback = (batch.course / "feedback" / "bob" / "exercise3" / "exercise3.html").read_text(encoding="utf-8")
    assert "mask.propagates" in feedback and "supports_masking is False" in feedback
    assert "mask: 5 of 6 points" in feedback


@pytest.mark.slow
def test_batch_refuses_a_test_cell_it_cannot_score(term, tmp_path):
    """A test cell that is not one of the exercise's topics would score full marks without running: refused."""
    from grader.integrations.outputs import Result
    from grader.integrations.discovery import Submission
    from grader.integrations.gradebook import store

    copy = tmp_path / "course"
    shutil.copytree(term.pristine, copy)
    (copy / "gradebook.db").unlink()
    extra = nbformat.v4.new_code_cell("assert False")
    extra.metadata["nbgrader"] = {"grade": True, "grade_id": "exercise3-extra", "locked": True, "points": 1.0,
                                  "schema_version": 3, "solution": False, "task": False}
    for path in (copy / "source" / "exercise3" / "exercise3.ipynb",
                 copy / "submitted" / "alice" / "exercise3" / "exercise3.ipynb"):
        notebook = nbformat.read(path, as_version=4)
        notebook.cells.append(extra)
        nbformat.write(notebook, path)
    nbgrader(copy, "generate_assignment", "exercise3", "--force")
    verdict = grade_warm("exercise3", path)
    stored = store(copy, "exercise3", [Result(Submission("alice", path, "alice"), verdict, 1.0)])
    assert stored.students == [] and "exercise3-extra" in stored.failed[0][1]


@pytest.mark.slow
def test_a_student_id_nbgrader_would_read_as_a_pattern_is_refused_and_the_class_stored(term, tmp_path):
    """nbgrader globs a student id: a stub handed in as ``alice*``, stored last, would autograde (and
    overwrite) alice. It is refused with the reason; alice and bob keep their own scores, read back."""
    from grader.integrations.outputs import Result
    from grader.integrations.discovery import Submission
    from grader.integrations.gradebook import store

    copy = tmp_path / "course"
    shutil.copytree(term.pristine, copy)
    star = submit(copy, "alice*", None)
    paths = {s: copy / "submitted" / s / "exercise3" / "exercise3.ipynb" for s in ("alice", "bob", "alice*")}
    verdicts = {s: grade_warm("exercise3", p) for s, p in paths.items()}
    assert verdicts["alice"].score == AUTOGRADED_POINTS and verdicts["alice*"].score == 0
    results = [Result(Submission(s, paths[s], s), verdicts[s], 1.0) for s in ("alice", "bob", "alice*")]
    stored = store(copy, "exercise3", results)
    assert stored.students == ["alice", "bob"] and stored.failed == []
    assert [s for s, _ in stored.skipped] == ["alice*"]
    assert "cannot be stored in nbgrader's gradebook" in stored.skipped[0][1] and "pattern" in stored.skipped[0][1]
    held = scores(copy, ("alice", "bob"))
    assert autograded(held["alice"]) == AUTOGRADED_POINTS and autograded(held["bob"]) == verdicts["bob"].score
    assert (copy / "autograded" / "alice" / "exercise3" / "exercise3.ipynb").is_file()
    assert star.is_file()  # the refused student's file is left as it was


@pytest.mark.slow
def test_a_score_the_gradebook_does_not_hold_as_given_is_an_error(term, tmp_path, monkeypatch):
    """Every stored score is read back: one that differs from its verdict is not counted as stored."""
    from grader.integrations import gradebook
    from grader.integrations.outputs import Result
    from grader.integrations.discovery import Submission

    copy = tmp_path / "course"
    shutil.copytree(term.pristine, copy)
    path = copy / "submitted" / "alice" / "exercise3" / "exercise3.ipynb"
    verdict = grade_warm("exercise3", path)
    real = gradebook.topic_outputs

    def one_point_short(verdict, topic):
        outputs = real(verdict, topic)
        if topic == "api":  # as if the cell's output had been changed on its way into the gradebook
            outputs[-1]["data"]["text/plain"] = repr(float(outputs[-1]["data"]["text/plain"]) - 1)
        return outputs

    monkeypatch.setattr(gradebook, "topic_outputs", one_point_short)
    stored = gradebook.store(copy, "exercise3", [Result(Submission("alice", path, "alice"), verdict, 1.0)])
    assert stored.students == [] and not stored.complete
    assert stored.failed[0][0] == "alice" and "the gradebook holds 22 points where the verdict gives 23" \
        in stored.failed[0][1]


@pytest.mark.slow
def test_batch_refuses_a_course_not_ready_before_grading(term, tmp_path):
    fresh = tmp_path / "course"
    write_course(fresh)
    submission = tmp_path / "alice.py"
    submission.write_text(SOLUTION, encoding="utf-8")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")

    def run(course: Path, exercise: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "grader", "batch", str(submission), "--exercise", exercise,
                               "--out", str(tmp_path / "out"), "--gradebook", str(course)],
                              capture_output=True, text=True, env=env, timeout=300)

    no_database = run(fresh, "exercise3")
    assert no_database.returncode == 2 and "gradebook.db does not exist" in no_database.stderr
    other_assignment = run(term.pristine, "exercise2")  # only exercise3 and exercise1 were generated there
    assert other_assignment.returncode == 2
    assert "has no notebook exercise2" in other_assignment.stderr
    assert "generate_assignment exercise2" in other_assignment.stderr
    assert not (tmp_path / "out").exists()  # nothing was graded


@pytest.mark.slow
def test_reading_the_course_config_leaves_this_process_environment_alone(term):
    from grader.integrations.gradebook import course_config

    before = dict(os.environ)
    config = course_config(term.pristine, "exercise3")
    assert dict(os.environ) == before
    assert config.CourseDirectory.course_id == "transformer-chapter"


def test_cell_outputs_from_a_verdict_are_what_assert_topic_prints_returns_and_raises():
    from grader.integrations.gradebook import topic_outputs
    from grader.verdict import CheckResult, Verdict

    checks = [CheckResult("weights.two_norms", "Two norms", "weights", "failed", 0.0, 2.0, "one instance is shared"),
              CheckResult("weights.trainable_list", "Weights", "weights", "passed", 1.0, 1.0, ""),
              CheckResult("api.builds", "Builds", "api", "passed", 2.0, 2.0, ""),
              CheckResult("mask.keys", "Keys", "mask", "failed", 0.0, 2.0, "padding is attended")]
    verdict = Verdict("exercise3", "bob.ipynb", "failed", 3.0, 7.0, None, checks, {})
    weights = topic_outputs(verdict, "weights")
    assert [o.output_type for o in weights] == ["stream", "execute_result"]
    assert "✗ Two norms (weights.two_norms): 0/2" in weights[0].text and "one instance is shared" in weights[0].text
    assert "weights: 1 of 3 points" in weights[0].text and weights[1].data["text/plain"] == "1.0"
    assert [o.output_type for o in topic_outputs(verdict, "api")] == ["stream", "execute_result"]
    mask = topic_outputs(verdict, "mask")  # a topic that earned nothing fails its cell, and says it all there
    assert [o.output_type for o in mask] == ["error"] and mask[0].evalue.startswith("mask: 0 of 2 points")
    assert "✗ Keys (mask.keys): 0/2" in mask[0].traceback
    assert "padding is attended" in mask[-1].evalue
    assert topic_outputs(verdict, "config")[-1].output_type == "error"  # no checks of a topic earn nothing
    broken = Verdict("exercise3", "carol.ipynb", "error", 0.0, 5.0, "SyntaxError in line 3", [], {})
    [output] = topic_outputs(broken, "api")
    assert output.output_type == "error" and "could not be graded: SyntaxError in line 3" in output.evalue


LONG = ("Observed: padded keys changed the output of real positions by up to 0.31, at positions 2 and 3 of "
        "the second sequence, where nothing should have moved.\nWhy it matters: a padding mask that does not "
        "reach attention lets the padding of a batch change every sentence's encoding.")


FORWARD = ("Observed: the output is LayerNormalization(x) + attention(x), the norm applied before the residual "
           "sum.\nWhy it matters: the book's encoder is post-norm, and a model built from your layer would train "
           "with other dynamics than the one the chapter describes.")


def _verdict_with_long_messages():
    from grader.verdict import CheckResult, Verdict

    checks = [CheckResult("mask.masks_keys", "Padded keys are masked", "mask", "failed", 0.0, 3.0, LONG),
              CheckResult("mask.padding_invariance", "Padding changes nothing", "mask", "failed", 0.0, 2.0,
                          "Not checked: the keys are not masked (see check mask.masks_keys)."),
              CheckResult("forward.post_norm", "Post-norm", "forward", "failed", 0.0, 2.0, FORWARD),
              CheckResult("forward.residuals", "Residuals", "forward", "passed", 2.0, 2.0, "")]
    return Verdict("exercise3", "bob.ipynb", "failed", 2.0, 9.0, None, checks, {})


def test_a_test_cell_leads_with_its_message_wrapped_and_a_failure_shows_no_traceback_in_a_real_kernel(tmp_path):
    """assert_topic in a real IPython kernel, on a verdict with long messages: the partly earned topic
    prints its points first, every line at most WIDTH columns; the topic that earned nothing raises an
    AssertionError whose traceback is its message alone, wrapped, not the frames of the cell and the
    grader. Nothing reaches stderr, and ``grade batch --gradebook`` writes the same outputs."""
    import nbclient

    from grader.integrations.gradebook import topic_outputs
    from grader.notebook import WIDTH

    setup = ("import grader.notebook as notebook\n"
             "from tests.test_nbgrader_course import _verdict_with_long_messages\n"
             "notebook.graded_source = lambda exercise_id, target: 'the answer'\n"
             "notebook.verdict_for = lambda exercise_id, source: _verdict_with_long_messages()\n")
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell(setup),
        nbformat.v4.new_code_cell('from grader.notebook import assert_topic\nassert_topic("exercise3", "forward")'),
        nbformat.v4.new_code_cell('from grader.notebook import assert_topic\nassert_topic("exercise3", "mask")'),
    ])
    notebook.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    nbclient.NotebookClient(notebook, timeout=120, allow_errors=True, kernel_name="python3",
                            resources={"metadata": {"path": str(exercises.PROJECT_ROOT)}}).execute()
    forward, mask = notebook.cells[1].outputs, notebook.cells[2].outputs
    assert [o.output_type for o in forward] == ["stream", "execute_result"]
    assert forward[0].text.startswith("forward: 2 of 4 points\n") and forward[1].data["text/plain"] == "2.0"
    assert "train with other dynamics than the one" in " ".join(forward[0].text.split())
    assert [o.output_type for o in mask] == ["error"]  # the message first: nothing printed before it
    error = mask[0]
    assert error.ename == "AssertionError" and error.evalue.startswith("mask: 0 of 5 points; 2 of 2 checks did not")
    assert error.traceback[0] == "mask: 0 of 5 points; 2 of 2 checks did not pass."
    shown = "\n".join(error.traceback)
    for noise in ("Traceback", "Cell In", "grader/notebook.py", "assert_topic(", "\x1b["):
        assert noise not in shown, noise
    assert "lets the padding of a batch change" in " ".join(shown.split())
    for output in forward + mask:
        assert output.get("name") != "stderr"
    assert "✗ Padded keys are masked (mask.masks_keys): 0/3" in error.traceback
    lines = forward[0].text.splitlines() + error.traceback
    assert max(len(line) for line in lines) <= WIDTH and any(len(line) > WIDTH // 2 for line in lines)
    for topic, outputs in (("forward", forward), ("mask", mask)):
        written = topic_outputs(_verdict_with_long_messages(), topic)
        assert [o.get("text") for o in written] == [o.get("text") for o in outputs]
        assert [o.get("traceback") for o in written] == [o.get("traceback") for o in outputs]


# --------------------------------------------------------------------------- the course config


def _grade_noisy_cells(folder: Path, config: str) -> dict[str, float]:
    """Autograde a two-cell assignment whose test cells make TensorFlow-like noise on stderr, one
    correct and one wrong; {cell: score}."""
    from nbgrader.api import Gradebook

    noisy = ("import os, time, warnings\n"
             "warnings.warn(\"Layer 'encoder' was passed an input with a mask attached to it\")  # what Keras warns\n"
             "os.write(2, b\"E0000 cuda_platform.cc:52] failed call to cuInit\\n\")  # what TensorFlow's C++ side logs\n"
             "time.sleep(1)\n")
    notebook = nbformat.v4.new_notebook()
    for grade_id, check in (("correct", "assert 1 + 1 == 2"), ("wrong", "assert 1 + 1 == 3")):
        cell = nbformat.v4.new_code_cell(noisy + check, metadata={"nbgrader": {
            "grade": True, "grade_id": grade_id, "locked": True, "points": 1, "schema_version": 3,
            "solution": False, "task": False}})
        cell.id = grade_id
        notebook.cells.append(cell)
    notebook.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    (folder / "source" / "noise").mkdir(parents=True)
    nbformat.write(notebook, folder / "source" / "noise" / "noise.ipynb")
    (folder / "nbgrader_config.py").write_text(config, encoding="utf-8")
    nbgrader(folder, "generate_assignment", "noise")
    (folder / "submitted" / "alice" / "noise").mkdir(parents=True)
    shutil.copy(folder / "release" / "noise" / "noise.ipynb", folder / "submitted" / "alice" / "noise" / "noise.ipynb")
    nbgrader(folder, "autograde", "noise", "--create")
    with Gradebook(f"sqlite:///{folder / 'gradebook.db'}") as gradebook:
        return {g.name: g.score for nb in gradebook.find_submission("noise", "alice").notebooks for g in nb.grades}


@pytest.mark.slow
def test_course_config_keeps_stderr_noise_from_zeroing_a_correct_cell_and_real_errors_still_fail(tmp_path):
    from grader.integrations.course import config_text

    (tmp_path / "plain").mkdir()
    (tmp_path / "ours").mkdir()
    assert _grade_noisy_cells(tmp_path / "plain", "c = get_config()\n") == {"correct": 0, "wrong": 0}
    assert _grade_noisy_cells(tmp_path / "ours", config_text()) == {"correct": 1, "wrong": 0}


# --------------------------------------------------------------------------- the course's files


def test_committed_course_is_what_the_command_writes(tmp_path):
    written = write_course(tmp_path)
    committed = exercises.PROJECT_ROOT / "solutions" / "nbgrader"
    for path in written:
        assert (committed / path.relative_to(tmp_path)).read_bytes() == path.read_bytes(), path


@pytest.mark.parametrize("exercise", list(exercises.EXERCISES))
def test_notebooks_follow_the_checks_points(exercise):
    notebook = build_notebook(exercises.get(exercise))
    graded = {c.metadata["nbgrader"]["grade_id"]: c.metadata["nbgrader"]["points"]
              for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade")
              and c.cell_type == "code"}
    assert graded == {f"{exercise}-{t}": p for t, p in topic_points(exercises.get(exercise)).items()}
    assert len({c.id for c in notebook.cells}) == len(notebook.cells)
    [check] = [c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == f"{exercise}-check"]
    meta = check.metadata["nbgrader"]
    assert meta["locked"] and not meta["grade"] and not meta["solution"]  # read-only: it scores nothing
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade") and cell.cell_type == "code":
            assert cell.source.rstrip().endswith(f'assert_topic("{exercise}", "{cell.metadata.nbgrader.grade_id.split("-")[1]}")\n### END HIDDEN TESTS')


@pytest.mark.parametrize("exercise", list(exercises.EXERCISES))
def test_notebook_instructions_say_how_to_work_in_the_notebook(exercise):
    text = notebook_instructions(exercises.get(exercise))
    assert "`grade" not in text and "exercises/" not in text
    assert "YOUR CODE HERE" in text and "Check your work" in text and "test cells" in text
    for topic, points in topic_points(exercises.get(exercise)).items():
        assert f"| {topic} | {points:g} |" in text
    answer = build_notebook(exercises.get(exercise)).cells[1].source
    assert "grade " not in answer.split("class ")[0] and "python -m" not in answer


def course_command(*args: str) -> int:
    try:
        return cli.main(["nbgrader-course", *args])
    except SystemExit as stopped:
        return stopped.code


def test_course_command_leaves_other_notebooks_alone_and_backs_up_what_it_replaces(tmp_path, capsys):
    course = tmp_path / "course"
    own = course / "source" / "week0" / "week0.ipynb"
    own.parent.mkdir(parents=True)
    own.write_text("{}", encoding="utf-8")
    assert course_command(str(course)) == 0
    assert "Release exercise5 only after exercise1 and exercise3 are due" in capsys.readouterr().out
    assert course_command(str(course)) == 0  # again: nothing differs, nothing refused
    assert own.read_text(encoding="utf-8") == "{}"
    edited = course / "source" / "exercise3" / "exercise3.ipynb"
    edited.write_text(edited.read_text(encoding="utf-8") + " ", encoding="utf-8")
    mine = edited.read_bytes()
    assert course_command(str(course)) == 2
    refusal = capsys.readouterr().err
    assert str(edited) in refusal and "--force" in refusal and "week0" not in refusal
    assert course_command(str(course), "--exercises", "exercise1", "exercise2") == 0  # the others only
    assert edited.read_bytes() == mine
    assert course_command(str(course), "--force") == 0
    [backup] = (course / "backups").glob("*/source/exercise3/exercise3.ipynb")
    assert backup.read_bytes() == mine and edited.read_bytes() != mine
    assert f"kept the earlier exercise3.ipynb as {backup}" in capsys.readouterr().out


def test_course_command_writes_a_chosen_subset(tmp_path, capsys):
    assert course_command(str(tmp_path), "--exercises", "exercise1", "exercise3") == 0
    assert sorted(p.name for p in (tmp_path / "source").iterdir()) == ["exercise1", "exercise3"]
    assert "Release exercise5" not in capsys.readouterr().out


def test_course_command_says_what_is_wrong_with_the_folder(tmp_path, capsys):
    file = tmp_path / "course.txt"
    file.write_text("notes", encoding="utf-8")
    assert course_command(str(file)) == 2
    error = capsys.readouterr().err
    assert "is a file, not a folder" in error and "Traceback" not in error
    assert course_command(str(tmp_path / "c"), "--exercises", "exercise9") == 2
    assert "unknown exercise 'exercise9'" in capsys.readouterr().err
