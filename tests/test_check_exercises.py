"""``python -m tools.check_exercises``: every exercise is whole, and a broken one is told apart."""

from __future__ import annotations

import shutil

import pytest

from grader import exercises
from grader import location
from grader.verdict import CheckResult, summarise
from tools import check_exercises


@pytest.mark.parametrize("exercise", exercises.EXERCISES.values(), ids=lambda e: e.id)
def test_every_exercise_is_whole(exercise):
    assert check_exercises.static_problems(exercise) == []


@pytest.fixture
def copied(tmp_path, monkeypatch):
    """exercise3's files copied into a folder the check reads instead of the repository's."""
    exercise = exercises.get("exercise3")
    (tmp_path / "exercises" / "hints").mkdir(parents=True)
    (tmp_path / "solutions").mkdir()
    for source, target in ((exercise.solution, tmp_path / "solutions"), (exercise.stub, tmp_path / "exercises"),
                           (exercise.instructions, tmp_path / "exercises"),
                           (exercise.hints, tmp_path / "exercises" / "hints")):
        shutil.copy(source, target)
    monkeypatch.setattr(location, "SOLUTIONS_DIR", tmp_path / "solutions")
    monkeypatch.setattr(location, "EXERCISES_DIR", tmp_path / "exercises")
    monkeypatch.setattr(exercises, "PROJECT_ROOT", tmp_path)  # no tests/catalog there
    return exercise, tmp_path


def test_a_broken_exercise_is_told_what_is_wrong_and_where(copied):
    exercise, root = copied
    stub = root / "exercises" / "exercise3.py"
    stub.write_text(stub.read_text(encoding="utf-8") + "\n# edited\n", encoding="utf-8")
    hints = root / "exercises" / "hints" / "exercise3.md"
    hints.write_text(hints.read_text(encoding="utf-8") + "\n## Hint 99\nChecks: weights.three_norms\n\nThree?\n",
                     encoding="utf-8")
    (root / "exercises" / "exercise3.md").unlink()
    problems = check_exercises.static_problems(exercise)
    assert any("exercise3.py is not the stub of its solution" in p for p in problems), problems
    assert any("hint" in p and "names weights.three_norms, which is no check" in p for p in problems), problems
    assert any(p.endswith("exercise3.md is missing") for p in problems), problems
    assert any("catalog/exercise3.py is missing" in p for p in problems), problems
    assert any("golden/exercise3.json is missing" in p for p in problems), problems


def test_a_solution_without_markers_is_told(copied):
    exercise, root = copied
    solution = root / "solutions" / "exercise3.py"
    solution.write_text(solution.read_text(encoding="utf-8").replace("### BEGIN SOLUTION", "# begin")
                        .replace("### END SOLUTION", "# end"), encoding="utf-8")
    assert any("has no ### BEGIN SOLUTION marker" in p for p in check_exercises.static_problems(exercise))


def _check(check_id, status, points):
    return CheckResult(id=check_id, title="t", topic="api", status=status, points=points if status == "passed" else 0,
                       max_points=points, message="")


def test_a_solution_short_of_full_marks_and_a_stub_with_points_are_told(monkeypatch):
    """The graded part, with the grading replaced by verdicts chosen here: a solution failing a check,
    and a stub earning a point."""
    import grader.api
    import grader.workers

    def fake_grade_pairs(items, settings, runner):
        for exercise_id, path in items:
            checks = [_check("api.constructor", "passed", 1), _check("api.output_shape", "failed", 1)]
            yield exercise_id, path, summarise(exercise_id, str(path), checks, {})

    class NoWorkers:
        def close(self):
            pass

    monkeypatch.setattr(grader.api, "grade_pairs", fake_grade_pairs)
    monkeypatch.setattr(grader.workers, "Workers", NoWorkers)
    problems = check_exercises.graded_problems([exercises.get("exercise2")])["exercise2"]
    assert problems == ["the solution earns 1/2 (not passed: api.output_shape)",
                        "the stub earns 1 point (api.constructor)"]


def test_a_stale_course_notebook_is_told(monkeypatch, tmp_path):
    import tools.generate

    course = tmp_path / "course"  # the committed course, exercise 3's notebook missing from it
    shutil.copytree(tools.generate.COURSE, course)
    (course / "source" / "exercise3" / "exercise3.ipynb").unlink()
    monkeypatch.setattr(tools.generate, "COURSE", course)
    check_exercises._drifted_course.cache_clear()
    try:
        problems = check_exercises.static_problems(exercises.get("exercise3"))
    finally:
        check_exercises._drifted_course.cache_clear()
    assert problems == [f"{course}/source/exercise3/exercise3.ipynb is not the course's notebook of the solution "
                        "(run python -m tools.generate)"]


SPEC = '''from ..spec import Exercise, Notebook

EXERCISE = Exercise(id="{id}", position={position}, parts=("norm",), title="t", target="T",
                    notebook=Notebook(visible_test=""))
'''


@pytest.mark.parametrize("position, init, says", [
    (7, False, "has a spec.py but no __init__.py"),
    (0, True, "position=0; an exercise declares its place"),
    (3, True, "exercise3 has position 3 in edition 2's track already"),
])
def test_the_registry_refuses_a_folder_it_would_drop_or_misplace(tmp_path, monkeypatch, position, init, says):
    """An exercise left out of the wheel (no __init__.py), or put first or beside another of its track
    (a place missing or taken), is an error that says so, never a silent change of the chapter."""
    import sys

    folder = tmp_path / "exercise9"
    folder.mkdir()
    (folder / "spec.py").write_text(SPEC.format(id="exercise9", position=position), encoding="utf-8")
    if init:
        (folder / "__init__.py").write_text("", encoding="utf-8")
    monkeypatch.setattr(exercises, "__path__", [*exercises.__path__, str(tmp_path)])
    try:
        with pytest.raises(ImportError, match=says):
            exercises._discover()
    finally:
        for name in [n for n in sys.modules if n.startswith("grader.exercises.exercise9")]:
            del sys.modules[name]
