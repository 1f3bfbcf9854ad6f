"""The nbgrader course, end to end with the real nbgrader: release, submit, autograde, gradebook, feedback."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from grader import exercises
from grader.grading import grade
from grader.notebooks import build_notebook, write_course

SOLUTION = exercises.get("exercise3").solution.read_text(encoding="utf-8")
SHARED_NORM = SOLUTION.replace("self.layernorm_2 = layers.LayerNormalization()", "self.layernorm_2 = self.layernorm_1")
AUTOGRADED_POINTS = sum(exercises.get("exercise3").topic_points().values())


def nbgrader(course: Path, *args: str, env_extra: dict | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    env.pop("TF_CPP_MIN_LOG_LEVEL", None)  # as an instructor's shell would be: the course config must cope
    env.update(env_extra or {})
    result = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=course, capture_output=True,
                            text=True, env=env, timeout=900)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def submit(course: Path, student: str, answer: str | None, written: str | None = None) -> Path:
    """Copy the released notebook into submitted/<student>/, with the answer cells filled in."""
    notebook = nbformat.read(course / "release" / "exercise3" / "exercise3.ipynb", as_version=4)
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("solution") and cell.cell_type == "code" and answer is not None:
            cell.source = answer
        if meta.get("solution") and cell.cell_type == "markdown" and written is not None:
            cell.source = written
    path = course / "submitted" / student / "exercise3" / "exercise3.ipynb"
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, path)
    return path


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    course = tmp_path_factory.mktemp("course")
    write_course(course)
    nbgrader(course, "generate_assignment", "exercise3")
    submit(course, "alice", SOLUTION, "Each norm learns its own gamma and beta.")
    submit(course, "bob", SHARED_NORM)
    submit(course, "carol", None)
    nbgrader(course, "autograde", "exercise3", "--create")
    return course


def scores(course: Path) -> dict[str, dict[str, float]]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        result = {}
        for student in ("alice", "bob", "carol"):
            submission = gradebook.find_submission("exercise3", student)
            result[student] = {g.name: g.score for notebook in submission.notebooks for g in notebook.grades}
        return result


def test_release_holds_no_solution_and_no_hidden_test(course):
    released = (course / "release" / "exercise3" / "exercise3.ipynb").read_text(encoding="utf-8")
    for secret in ("BEGIN SOLUTION", "HIDDEN TESTS", "assert_topic", "from grader", "Mark scheme",
                   "self.layernorm_2 = layers.LayerNormalization()", "config.update("):
        assert secret not in released
    assert "raise NotImplementedError()" in released and "YOUR ANSWER HERE" in released


def test_gradebook_has_full_partial_and_zero_marks(course):
    result = scores(course)
    alice, bob, carol = (sum(v for k, v in result[s].items() if k != "exercise3-why-two-norms")
                         for s in ("alice", "bob", "carol"))
    assert alice == AUTOGRADED_POINTS
    assert 0 < bob < AUTOGRADED_POINTS
    assert carol == 0
    # bob's one mistake costs exactly the cells of its topics
    assert result["bob"]["exercise3-weights"] == 0 and result["bob"]["exercise3-gradients"] == 0
    assert result["bob"]["exercise3-forward"] == exercises.get("exercise3").topic_points()["forward"]


def test_correct_cells_have_no_stderr_output(course):
    notebook = json.loads((course / "autograded" / "alice" / "exercise3" / "exercise3.ipynb").read_text())
    for cell in notebook["cells"]:
        for output in cell.get("outputs", []):
            assert not (output.get("output_type") == "stream" and output.get("name") == "stderr"), output


def test_feedback_shows_the_checks_messages(course):
    nbgrader(course, "generate_feedback", "exercise3")
    feedback = (course / "feedback" / "bob" / "exercise3" / "exercise3.html").read_text(encoding="utf-8")
    assert "weights.two_norms" in feedback and "one instance is called 2 times" in feedback


def test_grading_the_notebook_directly_agrees_with_the_python_file(course, tmp_path):
    notebook_verdict = grade("exercise3", course / "submitted" / "bob" / "exercise3" / "exercise3.ipynb")
    py = tmp_path / "bob.py"
    py.write_text(SHARED_NORM, encoding="utf-8")
    python_verdict = grade("exercise3", py)
    assert [(c.id, c.status, c.points) for c in notebook_verdict.checks] == \
        [(c.id, c.status, c.points) for c in python_verdict.checks]


NOISY_CELL = """\
import os, time, warnings
warnings.warn("Layer 'encoder' was passed an input with a mask attached to it")  # what Keras warns
os.write(2, b"E0000 cuda_platform.cc:52] failed call to cuInit\\n")  # what TensorFlow's C++ side logs
time.sleep(1)
assert 1 + 1 == 2
"""


def _autograde_noisy_cell(folder: Path, config: str, source: str = NOISY_CELL) -> float:
    """Autograde a one-cell assignment whose correct test cell makes TensorFlow-like noise on stderr."""
    from nbgrader.api import Gradebook

    notebook = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(source, metadata={"nbgrader": {
        "grade": True, "grade_id": "noisy", "locked": True, "points": 1, "schema_version": 3,
        "solution": False, "task": False}})
    cell.id = "noisy"
    notebook.cells = [cell]
    notebook.metadata = {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}}
    (folder / "source" / "noise").mkdir(parents=True)
    nbformat.write(notebook, folder / "source" / "noise" / "noise.ipynb")
    (folder / "nbgrader_config.py").write_text(config, encoding="utf-8")
    nbgrader(folder, "generate_assignment", "noise")
    (folder / "submitted" / "alice" / "noise").mkdir(parents=True)
    (folder / "submitted" / "alice" / "noise" / "noise.ipynb").write_bytes(
        (folder / "release" / "noise" / "noise.ipynb").read_bytes())
    nbgrader(folder, "autograde", "noise", "--create")
    with Gradebook(f"sqlite:///{folder / 'gradebook.db'}") as gradebook:
        return gradebook.find_submission("noise", "alice").score


def test_course_config_keeps_stderr_noise_from_zeroing_a_correct_cell(tmp_path):
    from grader.notebooks import config_text

    plain = "c = get_config()\nc.CourseDirectory.db_assignments = [{'name': 'noise'}]\n"
    ours = config_text().replace(repr([{"name": e} for e in exercises.EXERCISES]), "[{'name': 'noise'}]")
    assert "noise" in ours
    (tmp_path / "plain").mkdir()
    (tmp_path / "ours").mkdir()
    assert _autograde_noisy_cell(tmp_path / "plain", plain) == 0  # what a new instructor meets
    assert _autograde_noisy_cell(tmp_path / "ours", ours) == 1


def test_a_real_error_still_fails_under_the_course_config(tmp_path):
    from grader.notebooks import config_text

    config = config_text().replace(repr([{"name": e} for e in exercises.EXERCISES]), "[{'name': 'noise'}]")
    wrong = NOISY_CELL.replace("assert 1 + 1 == 2", "assert 1 + 1 == 3")
    assert _autograde_noisy_cell(tmp_path, config, wrong) == 0


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
    assert graded == {f"{exercise}-{t}": p for t, p in exercises.get(exercise).topic_points().items()}
    assert len({c.id for c in notebook.cells}) == len(notebook.cells)


def test_course_command_refuses_to_overwrite_changed_notebooks(tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    command = [sys.executable, "-m", "grader", "nbgrader-course", str(tmp_path)]
    assert subprocess.run(command, capture_output=True, env=env).returncode == 0
    edited = tmp_path / "source" / "exercise3" / "exercise3.ipynb"
    edited.write_text(edited.read_text() + " ", encoding="utf-8")
    refused = subprocess.run(command, capture_output=True, text=True, env=env)
    assert refused.returncode == 2 and "--force" in refused.stderr
    assert subprocess.run(command + ["--force"], capture_output=True, env=env).returncode == 0


def test_batch_autogrades_into_the_gradebook_without_executing_notebooks(course, tmp_path):
    """grade batch --gradebook gives every cell autograde's score, writes the autograded notebooks,
    and nbgrader export and generate_feedback work, while no kernel could have started."""
    copy = tmp_path / "course"
    shutil.copytree(course, copy, ignore=shutil.ignore_patterns("autograded", "feedback"))
    (copy / "gradebook.db").unlink()
    nbgrader(copy, "generate_assignment", "exercise3", "--force")
    with open(copy / "nbgrader_config.py", "a", encoding="utf-8") as config:
        config.write('\nc.Execute.kernel_name = "no-such-kernel"  # executing a notebook would fail\n')
    (copy / "submitted" / "dave" / "exercise3").mkdir(parents=True)
    (copy / "submitted" / "dave" / "exercise3" / "exercise3.py").write_text(SOLUTION, encoding="utf-8")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", COLUMNS="200")
    result = subprocess.run([sys.executable, "-m", "grader", "batch", str(copy / "submitted"), "--exercise",
                             "exercise3", "--out", str(tmp_path / "out"), "--gradebook", str(copy)],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert "Autograded 3 student(s)" in result.stdout
    assert "Not stored for dave: not a notebook at submitted/dave/exercise3/exercise3.ipynb" in result.stdout
    assert scores(copy) == scores(course)
    bob = json.loads((copy / "autograded" / "bob" / "exercise3" / "exercise3.ipynb").read_text())
    cells = {c["metadata"].get("nbgrader", {}).get("grade_id"): c for c in bob["cells"]}
    assert [o["output_type"] for o in cells["exercise3-weights"]["outputs"]] == ["stream", "error"]
    assert [o["output_type"] for o in cells["exercise3-forward"]["outputs"]] == ["stream"]
    nbgrader(copy, "export")
    exported = (copy / "grades.csv").read_text(encoding="utf-8")
    assert "alice" in exported and "bob" in exported
    nbgrader(copy, "generate_feedback", "exercise3")
    feedback = (copy / "feedback" / "bob" / "exercise3" / "exercise3.html").read_text(encoding="utf-8")
    assert "weights.two_norms" in feedback and "one instance is called 2 times" in feedback


def test_batch_refuses_a_test_cell_it_cannot_score(course, tmp_path):
    """A test cell that is not one of the exercise's topics would score full marks without running: refused."""
    from grader.gradebook import store
    from grader.grading import grade as grade_one
    from grader.batch import Result, Submission

    copy = tmp_path / "course"
    shutil.copytree(course, copy, ignore=shutil.ignore_patterns("autograded", "feedback"))
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
    verdict = grade_one("exercise3", path)
    stored = store(copy, "exercise3", [Result(Submission("alice", path), verdict, 1.0)])
    assert stored.students == [] and "exercise3-extra" in stored.failed[0][1]


def test_cell_outputs_from_a_verdict_are_what_assert_topic_prints_and_raises():
    from grader.gradebook import topic_outputs
    from grader.verdict import CheckResult, Verdict

    checks = [CheckResult("weights.two_norms", "Two norms", "weights", "failed", 0.0, 2.0, "one instance is shared"),
              CheckResult("weights.trainable_list", "Weights", "weights", "passed", 1.0, 1.0, ""),
              CheckResult("api.builds", "Builds", "api", "passed", 2.0, 2.0, "")]
    verdict = Verdict("exercise3", "bob.ipynb", "failed", 3.0, 5.0, None, checks, {})
    weights = topic_outputs(verdict, "weights")
    assert [o.output_type for o in weights] == ["stream", "error"]
    assert "✗ Two norms (weights.two_norms): 0/2" in weights[0].text
    assert weights[1].ename == "AssertionError" and "1 of 2 weights check(s)" in weights[1].evalue
    assert "one instance is shared" in weights[1].evalue
    assert [o.output_type for o in topic_outputs(verdict, "api")] == ["stream"]
    assert topic_outputs(verdict, "mask")[-1].output_type == "error"  # no checks of a topic earn nothing
    broken = Verdict("exercise3", "carol.ipynb", "error", 0.0, 5.0, "SyntaxError in line 3", [], {})
    [output] = topic_outputs(broken, "api")
    assert output.output_type == "error" and "could not be graded: SyntaxError in line 3" in output.evalue


def test_batch_refuses_a_course_not_ready_before_grading(tmp_path):
    course = tmp_path / "course"
    write_course(course)
    submission = tmp_path / "alice.py"
    submission.write_text(SOLUTION, encoding="utf-8")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    command = [sys.executable, "-m", "grader", "batch", str(submission), "--exercise", "exercise3",
               "--out", str(tmp_path / "out"), "--gradebook", str(course)]
    no_database = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert no_database.returncode == 2 and "gradebook.db does not exist" in no_database.stderr
    nbgrader(course, "generate_assignment", "exercise1")
    other_assignment = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert other_assignment.returncode == 2
    assert "has no notebook exercise3" in other_assignment.stderr
    assert "generate_assignment exercise3" in other_assignment.stderr
    assert not (tmp_path / "out").exists()  # nothing was graded
