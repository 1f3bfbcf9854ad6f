"""`grade init` writes a workspace that `grade list` and `grade EXERCISE` find, and loses no work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader import cli, exercises
from grader.exercises import tracks
from grader.student.workspace import WorkspaceConflict, init_workspace, workspace_files

SECOND = tracks.get(tracks.DEFAULT).exercises  # a workspace made without --edition holds these


def run(*args, cwd, tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", COLUMNS="160", GRADE_STATE_DIR=str(tmp_path / "state"))
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=600)


def test_a_workspace_holds_every_stub_instruction_and_hint(tmp_path):
    result = init_workspace(tmp_path / "ws")
    assert len(result.written) == 3 * len(SECOND) and not result.unchanged
    for exercise in map(exercises.get, SECOND):
        folder = tmp_path / "ws" / "exercises"
        assert (folder / f"{exercise.id}.py").read_bytes() == exercise.stub.read_bytes()
        assert (folder / f"{exercise.id}.md").read_bytes() == exercise.instructions.read_bytes()
        assert (folder / "hints" / f"{exercise.id}.md").read_bytes() == exercise.hints.read_bytes()
    assert sorted(p.relative_to(tmp_path / "ws") for p in result.written) == sorted(workspace_files())


def test_init_again_changes_nothing(tmp_path):
    init_workspace(tmp_path)
    again = init_workspace(tmp_path)
    assert not again.written and len(again.unchanged) == len(workspace_files())


def test_edited_files_stop_init_before_anything_is_written(tmp_path):
    init_workspace(tmp_path)
    edited = tmp_path / "exercises" / "exercise3.py"
    edited.write_text("my encoder\n")
    (tmp_path / "exercises" / "exercise1.md").unlink()
    with pytest.raises(WorkspaceConflict) as caught:
        init_workspace(tmp_path)
    assert caught.value.paths == [edited]
    assert edited.read_text() == "my encoder\n"
    assert not (tmp_path / "exercises" / "exercise1.md").exists()  # nothing written, not even what was missing


def test_force_replaces_edited_files_and_keeps_them(tmp_path):
    init_workspace(tmp_path)
    edited = tmp_path / "exercises" / "exercise3.py"
    edited.write_text("my encoder\n")
    (tmp_path / "exercises" / "exercise3.py.bak").write_text("an older backup\n")
    result = init_workspace(tmp_path, force=True)
    assert result.written == [edited]
    assert edited.read_bytes() == exercises.get("exercise3").stub.read_bytes()
    assert result.backups[edited].name == "exercise3.py.bak2"
    assert result.backups[edited].read_text() == "my encoder\n"
    assert (tmp_path / "exercises" / "exercise3.py.bak").read_text() == "an older backup\n"


def test_init_command_says_what_it_wrote_and_what_to_do_next(tmp_path):
    result = run("init", "course work", cwd=tmp_path, tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"wrote {tmp_path / 'course work' / 'exercises' / 'exercise1.py'}" in result.stdout
    assert "Next: cd 'course work' && grade list" in result.stdout
    (tmp_path / "course work" / "exercises" / "exercise2.py").write_text("mine\n")
    refused = run("init", "course work", cwd=tmp_path, tmp_path=tmp_path)
    assert refused.returncode == 2
    assert "nothing was written" in refused.stderr and "exercise2.py" in refused.stderr and "--force" in refused.stderr
    forced = run("init", "course work", "--force", cwd=tmp_path, tmp_path=tmp_path)
    assert forced.returncode == 0 and "your version is kept as exercise2.py.bak" in forced.stdout


def test_init_into_a_file_is_refused(tmp_path):
    (tmp_path / "taken").write_text("x")
    result = run("init", "taken", cwd=tmp_path, tmp_path=tmp_path)
    assert result.returncode == 2 and "is not a folder" in result.stderr


def test_list_finds_the_workspace_from_any_folder_inside_it(tmp_path):
    init_workspace(tmp_path / "ws")
    (tmp_path / "ws" / "notes").mkdir()
    listed = run("list", "--json", cwd=tmp_path / "ws" / "notes", tmp_path=tmp_path)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [Path(r["stub"]) for r in rows] == [
        (tmp_path / "ws" / "exercises" / f"{e}.py").resolve() for e in SECOND]
    table = run("list", cwd=tmp_path / "ws" / "notes", tmp_path=tmp_path)
    assert table.stdout.count("not started") == len(SECOND) and "0 of 5" in table.stdout


def test_installed_package_outside_a_workspace_points_to_grade_init(tmp_path, monkeypatch, capsys):
    """From a wheel there is no clone to fall back on: grade says how to make a workspace."""
    monkeypatch.setattr(exercises, "INSTALLED_FROM_WHEEL", True)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GRADE_STATE_DIR", str(tmp_path / "state"))
    with pytest.raises(SystemExit) as exited:
        cli.main(["exercise1"])
    assert exited.value.code == 2
    error = capsys.readouterr().err
    assert "no working copy of exercise1" in error and "grade init DIR" in error
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    assert out.count("no workspace") == len(SECOND) and "`grade init DIR`" in out


@pytest.mark.parametrize("from_wheel, says", [
    (True, "warning: this package carries exercise files that differ from the stubs"),
    (False, "note: the clone this grader runs from has edited exercise files"),
])
def test_init_from_a_package_that_carries_a_solved_exercise_warns_and_writes_the_stub(
        tmp_path, monkeypatch, capsys, from_wheel, says):
    """A wheel built by an older build step (or a clone's working copies) may hold answers: the
    workspace gets the stub generated from the solution, and init names the file it left out."""
    import shutil

    from grader.exercises.stubs import fresh_stub

    shipped = tmp_path / "package" / "_exercises"
    shutil.copytree(exercises.EXERCISES_DIR, shipped)
    solved = shipped / "exercise3.py"
    solved.write_text(exercises.get("exercise3").solution.read_text(encoding="utf-8"), encoding="utf-8")
    from grader import location

    monkeypatch.setattr(exercises, "EXERCISES_DIR", shipped)
    monkeypatch.setattr(location, "EXERCISES_DIR", shipped)  # where each exercise finds its files
    monkeypatch.setattr(exercises, "INSTALLED_FROM_WHEEL", from_wheel)
    monkeypatch.chdir(tmp_path)
    assert cli.main(["init", "ws"]) == 0
    err = capsys.readouterr().err
    assert says in err and str(solved) in err and "exercise1.py" not in err
    written = tmp_path / "ws" / "exercises" / "exercise3.py"
    assert written.read_text(encoding="utf-8") == fresh_stub(exercises.get("exercise3"))
    assert "raise NotImplementedError()" in written.read_text(encoding="utf-8")


def test_init_from_a_package_of_stubs_says_nothing_more(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["init", "ws"]) == 0
    assert capsys.readouterr().err == ""
