"""Stubs are generated from the solutions, committed, and must not drift."""

from __future__ import annotations

import pytest

from grader import exercises
from grader.exercises.stubs import MarkerError, make_stub
from tools.generate import main


@pytest.mark.parametrize("exercise", exercises.EXERCISES.values(), ids=lambda e: e.id)
def test_committed_stub_matches_its_solution(exercise):
    expected = make_stub(exercise.solution.read_text(encoding="utf-8"))
    assert exercise.stub.read_text(encoding="utf-8") == expected, "run: python -m tools.generate"


def test_check_mode_reports_no_drift(capsys):
    assert main(["--check"]) == 0


@pytest.mark.parametrize("exercise", exercises.EXERCISES.values(), ids=lambda e: e.id)
def test_stub_keeps_signatures_and_docstrings_but_no_solution(exercise):
    stub = exercise.stub.read_text(encoding="utf-8")
    assert "BEGIN SOLUTION" not in stub and "END SOLUTION" not in stub
    assert f"{'class' if exercise.kind == 'layer' else 'def'} {exercise.target}(" in stub
    assert "raise NotImplementedError()" in stub
    assert exercise.instructions.is_file() and exercise.hints.is_file()


def test_regions_are_replaced_at_their_indentation():
    source = "def f(x):\n    \"\"\"Doc.\"\"\"\n    ### BEGIN SOLUTION\n    return x + 1\n    ### END SOLUTION\n"
    assert make_stub(source) == 'def f(x):\n    """Doc."""\n    # YOUR CODE HERE\n    raise NotImplementedError()\n'


@pytest.mark.parametrize(
    "source, says",
    [
        ("### BEGIN SOLUTION\nx = 1\n", "never closed"),
        ("x = 1\n### END SOLUTION\n", "without BEGIN"),
        ("### BEGIN SOLUTION\n### BEGIN SOLUTION\n### END SOLUTION\n", "inside the region"),
    ],
)
def test_unbalanced_markers_are_reported(source, says):
    with pytest.raises(MarkerError, match=says):
        make_stub(source)


def test_ci_runs_the_readme_test_command():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    readme = (root / "README.md").read_text(encoding="utf-8")
    command = """python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest"""
    assert command in readme
    assert command in (root / ".ci" / "run").read_text(encoding="utf-8")
