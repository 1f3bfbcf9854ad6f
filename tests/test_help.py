"""`grade --help` and every command's help fit an 80-column terminal; mistyped names get the nearest one."""

from __future__ import annotations

import pytest

from grader import cli, exercises
from grader.cli.common import nearest
from grader.exercises import tracks

WIDTH = 80
HELPS = [["--help"]] + [[command, "--help"] for command in cli.COMMANDS] + [["server", action, "--help"]
                                                                           for action in ("status", "stop")]


def help_text(argv, monkeypatch, capsys) -> str:
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("argv", HELPS, ids=" ".join)
def test_help_fits_80_columns(argv, monkeypatch, capsys):
    text = help_text(argv, monkeypatch, capsys)
    assert text.strip()
    too_wide = [line for line in text.splitlines() if len(line) > WIDTH]
    assert not too_wide, "\n".join(too_wide)


def test_the_overview_has_one_line_with_an_example_per_command(monkeypatch, capsys):
    lines = help_text(["--help"], monkeypatch, capsys).splitlines()
    for command in cli.COMMANDS:
        examples = [line for line in lines if line.startswith(f"  grade {command} ")
                    or line.rstrip() == f"  grade {command}"]
        assert len(examples) == 1, (command, examples)
        example, _, what = examples[0].strip().partition("   ")
        assert example.startswith(f"grade {command}") and what.strip(), examples[0]
    assert any(line.startswith("  grade exercise1 ") for line in lines)  # grading itself
    assert any(line.startswith("  grade exercise1 --watch ") for line in lines)


def test_the_overview_names_the_grading_server_and_how_to_grade_without_it(monkeypatch, capsys):
    text = help_text(["--help"], monkeypatch, capsys)
    assert "  grade server status        the warm grading server (stop: end it)" in text
    assert "--no-server" in text and "GRADE_SERVER=off" in text and "GRADE_SERVER_IDLE=SECONDS" in text
    server = help_text(["server", "--help"], monkeypatch, capsys)
    assert "{status,stop}" in server and "exit code 1 when none runs" in server
    assert "end it and its workers" in server and "GRADE_SERVER=off" in server


def test_the_overview_names_the_exit_codes_and_quiet_tensorflow(monkeypatch, capsys):
    text = help_text(["--help"], monkeypatch, capsys)
    assert "exit codes: 0 every check passed, 1 some check failed, 2 the submission" in text
    assert "TF_CPP_MIN_LOG_LEVEL=3" in text


@pytest.mark.parametrize("argv, suggestion", [
    (["exercse3"], "did you mean exercise3?"),
    (["exercise33"], "did you mean exercise3?"),
    (["lsit"], "did you mean grade list?"),
    (["explian", "exercise3"], "did you mean grade explain?"),
    (["hnit"], "did you mean grade init or grade hint?"),
    (["gradescope", "exercise3"], "did you mean grade gradescope-autograder?"),
    (["hint", "exercse4"], "did you mean exercise4?"),
    (["batch", "x", "--exercise", "exrcise2", "--out", "o"], "did you mean exercise2?"),
    (["explain", "exercise33"], "did you mean exercise3?"),
])
def test_a_mistyped_name_gets_the_nearest_one(argv, suggestion, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("COLUMNS", str(WIDTH))
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "unknown exercise '" in err
    assert suggestion in err
    assert all(len(line) <= WIDTH for line in err.splitlines()), err


@pytest.mark.parametrize("name", ["exercise9", "exercise", "xyz"])
def test_no_suggestion_when_nothing_is_nearest(name, tmp_path, monkeypatch, capsys):
    """exercise9 is as near to exercise1 as to exercise5: naming one would mislead."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit):
        cli.main([name])
    err = capsys.readouterr().err
    assert f"unknown exercise {name!r}" in err and "did you mean" not in err
    assert all(", ".join(track.exercises) in err for track in tracks.TRACKS)


def test_nearest_picks_the_best_and_at_most_two_ties():
    assert nearest("exercse3", list(exercises.EXERCISES)) == ["exercise3"]
    assert nearest("exercise9", list(exercises.EXERCISES)) == []
    assert nearest("hnit", ["init", "hint", "list"]) == ["init", "hint"]
    assert nearest("zzz", ["init", "hint"]) == []
