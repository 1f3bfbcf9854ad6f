"""The `grade` command keeps the grading contract: exit codes, JSON verdict, list, help."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from grader import exercises
from grader.verdict import CHECK_STATUSES, TOPICS

EXERCISE = exercises.get("exercise3")
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", COLUMNS="100", GRADE_STATE_DIR=tempfile.mkdtemp())


def grade(*args, cwd=None):
    return subprocess.run(
        [sys.executable, "-m", "grader", *args], capture_output=True, text=True, env=ENV, cwd=cwd, timeout=300
    )


def assert_contract(verdict: dict):
    assert set(verdict) == {"version", "exercise", "submission", "status", "score", "max_score", "error", "checks",
                            "backend"}
    assert verdict["status"] in ("passed", "failed", "error")
    for check in verdict["checks"]:
        assert set(check) == {"id", "title", "topic", "status", "points", "max_points", "message"}
        assert check["topic"] in TOPICS and check["status"] in CHECK_STATUSES
        assert 0 <= check["points"] <= check["max_points"]
    assert verdict["score"] == pytest.approx(sum(c["points"] for c in verdict["checks"]))


def test_json_verdict_of_the_solution(tmp_path):
    result = grade("exercise3", "--submission", str(EXERCISE.solution), "--json")
    assert result.returncode == 0, result.stderr
    verdict = json.loads(result.stdout)  # stdout holds only the verdict
    assert_contract(verdict)
    assert verdict["status"] == "passed" and verdict["score"] == verdict["max_score"]
    assert verdict["submission"] == str(EXERCISE.solution)
    assert {c["topic"] for c in verdict["checks"]} == set(TOPICS)


def test_working_copy_is_found_from_the_project_folder():
    result = grade("exercise3", cwd=EXERCISE.stub.parent.parent)
    assert result.returncode == 1
    assert "exercises/exercise3.py" in result.stdout
    assert "Score 0/" in result.stdout
    assert "NotImplementedError" in result.stdout


def test_syntax_error_exits_2_with_json_error(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("class TransformerEncoder(:\n", encoding="utf-8")
    result = grade("exercise3", "--submission", str(bad), "--json")
    assert result.returncode == 2
    verdict = json.loads(result.stdout)
    assert_contract(verdict)
    assert verdict["status"] == "error" and "SyntaxError at line 1" in verdict["error"]


def test_list_json_gives_absolute_paths():
    result = grade("list", "--json")
    assert result.returncode == 0
    rows = json.loads(result.stdout)
    assert [r["id"] for r in rows] == list(exercises.EXERCISES)
    for row in rows:
        # the contract's keys, and the label saying the solution is the reference answer
        assert set(row) == {"id", "title", "stub", "solution", "solution_is_answer"}
        assert Path(row["stub"]).is_absolute() and Path(row["solution"]).is_file()
        assert row["solution_is_answer"] is True


def test_list_table_in_a_clone_shows_its_default_edition_and_how_to_see_the_other():
    from grader.exercises import tracks

    result = grade("list", cwd=EXERCISE.stub.parent.parent)
    assert result.returncode == 0, result.stderr
    second, third = tracks.get("2"), tracks.get("3")
    assert all(exercise in result.stdout for exercise in second.exercises)
    assert not any(f"│ {exercise}" in result.stdout for exercise in third.exercises)
    assert "of 5 exercises passed" in result.stdout
    note = f"This clone also holds the exercises of {third.chapter}: grade list --edition 3."
    assert note in " ".join(result.stdout.split())
    chosen = grade("list", "--edition", "3", cwd=EXERCISE.stub.parent.parent)
    assert all(f"│ {exercise}" in chosen.stdout for exercise in third.exercises) and "--edition" not in chosen.stdout


def test_piped_reports_end_their_lines_without_padding(tmp_path):
    """Rich pads a report to the console's width; through a pipe, no line ends with a space."""
    from grader.exercises.stubs import fresh_stub

    submission = tmp_path / "exercise3.py"
    submission.write_text(fresh_stub(EXERCISE), encoding="utf-8")
    result = grade("exercise3", "--submission", str(submission), "--no-server")
    assert result.returncode == 1, result.stderr
    assert "Score 0/23" in result.stdout and "NotImplementedError" in result.stdout
    padded = [line for line in result.stdout.splitlines() if line.endswith(" ")]
    assert not padded, padded
    listed = grade("list", cwd=tmp_path)
    assert listed.returncode == 0 and not [line for line in listed.stdout.splitlines() if line.endswith(" ")]


def test_the_unpadded_stream_keeps_everything_but_the_spaces_ending_a_line():
    import io

    from grader.cli.common import _Unpadded

    out = io.StringIO()
    stream = _Unpadded(out)
    stream.write("a  b   \nc")
    assert out.getvalue() == "a  b\n"  # the open line waits for its end
    stream.write("  d \x1b[0m\n   \n")
    stream.write("tail  ")
    stream.flush()
    assert out.getvalue() == "a  b\nc  d\x1b[0m\n\ntail  "


def test_help_explains_usage_and_exit_codes():
    result = grade("--help")
    assert result.returncode == 0
    assert "--submission" in result.stdout and "exit codes" in result.stdout


@pytest.mark.parametrize(
    "args, says",
    [
        (["exercise9"], "unknown exercise 'exercise9'"),
        (["exercise3", "--timeout", "0"], "--timeout must be at least"),
        (["exercise3", "--memory", "lots"], "invalid int value"),
    ],
)
def test_bad_arguments_are_explained(args, says):
    result = grade(*args)
    assert result.returncode == 2
    assert says in result.stderr


def test_bad_environment_setting_names_its_source():
    env = dict(ENV, GRADE_TIMEOUT="soon")
    result = subprocess.run([sys.executable, "-m", "grader", "exercise3"], capture_output=True, text=True, env=env)
    assert result.returncode == 2 and "GRADE_TIMEOUT" in result.stderr


def test_grade_alone_shows_the_exercise_list(tmp_path):
    result = grade(cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    from grader.exercises import tracks

    shown = tracks.get(tracks.DEFAULT).exercises  # outside a workspace: the clone's, in its default edition
    assert all(e in result.stdout for e in shown) and "exercises passed" in result.stdout
    assert "grade list --edition 3" in result.stdout


def test_an_exercise_by_number_and_by_the_path_of_its_file(tmp_path):
    workspace = tmp_path / "exercises"
    workspace.mkdir()
    (workspace / "exercise3.py").write_text(EXERCISE.solution.read_text(encoding="utf-8"), encoding="utf-8")
    by_number = grade("3", "--json", cwd=tmp_path)
    by_path = grade("exercises/exercise3.py", "--json", cwd=tmp_path)
    for result in (by_number, by_path):
        verdict = json.loads(result.stdout)
        assert verdict["exercise"] == "exercise3" and verdict["status"] == "passed", result.stderr
        assert verdict["submission"] == str((workspace / "exercise3.py").resolve())
    unnamed = grade("notes.py", cwd=tmp_path)
    assert unnamed.returncode == 2 and "cannot tell which exercise notes.py is" in unnamed.stderr


def test_outside_a_workspace_grade_says_which_file_it_grades(tmp_path):
    result = grade("exercise1", "--json", cwd=tmp_path)
    verdict = json.loads(result.stdout)
    assert verdict["submission"] == str(exercises.get("exercise1").stub)
    assert f"No exercises/exercise1.py in {tmp_path}" in result.stderr and "grade init" in result.stderr
