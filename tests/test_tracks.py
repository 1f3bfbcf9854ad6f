"""Each edition of the book is a track: `grade init --edition 3` writes the third edition's
workspace, and inside it `grade list`, `grade N`, the report's next step and the hints are the
third edition's; without --edition everything stays the second edition's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader.cli.common import exercise_choice, exercise_or_file, nearest
from grader.cli.grading import grade_parser
from grader import exercises
from grader.exercises import tracks
from grader.student.workspace import init_workspace, workspace_files

THIRD = tracks.get("3")


def run(*args, cwd, tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", COLUMNS="80", GRADE_STATE_DIR=str(tmp_path / "state"))
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True, text=True, cwd=cwd,
                          env=env, timeout=600)


def test_every_exercise_is_in_exactly_one_track_and_every_track_name_is_an_exercise():
    named = [exercise_id for track in tracks.TRACKS for exercise_id in track.exercises]
    assert sorted(named) == sorted(exercises.EXERCISES) and len(named) == len(set(named))
    assert len(set(tracks.names())) == len(tracks.TRACKS) and tracks.DEFAULT in tracks.names()
    assert list(exercises.EXERCISES) == named  # the registry lists them track by track, in order


def test_the_third_editions_ids_cannot_be_taken_for_the_seconds():
    second = tracks.get("2").exercises
    for exercise_id in THIRD.exercises:
        assert not any(exercise_id.startswith(other) or other.startswith(exercise_id) for other in second)
        assert nearest(exercise_id, list(second)) == []


def test_an_unknown_edition_is_refused_with_the_known_ones():
    with pytest.raises(KeyError, match="editions 2, 3"):
        tracks.get("4")


def test_a_third_edition_workspace_holds_its_files_and_no_others(tmp_path):
    result = init_workspace(tmp_path, edition="3")
    written = sorted(p.relative_to(tmp_path) for p in result.written)
    assert written == sorted(workspace_files("3"))
    assert written == sorted(Path("exercises") / name for e in THIRD.exercises
                             for name in (f"{e}.py", f"{e}.md", f"hints/{e}.md"))
    for exercise in map(exercises.get, THIRD.exercises):
        assert (tmp_path / "exercises" / f"{exercise.id}.py").read_bytes() == exercise.stub.read_bytes()
    assert tracks.in_folder(tmp_path / "exercises") == [THIRD]


def test_third_edition_files_use_the_books_names():
    stub = exercises.get("ch15_encoder").stub.read_text(encoding="utf-8")
    assert "def __init__(self, hidden_dim, intermediate_dim, num_heads, **kwargs):" in stub
    assert "def call(self, source, source_mask):" in stub
    decoder = exercises.get("ch15_decoder").stub.read_text(encoding="utf-8")
    assert "def call(self, target, source, source_mask):" in decoder
    for exercise_id in THIRD.exercises:
        instructions = " ".join(exercises.get(exercise_id).instructions.read_text(encoding="utf-8").split())
        assert "3rd ed., chapter 15" in instructions and f"grade {exercise_id}" in instructions
        # what the exercise asks beyond the book, and why
        assert "beyond the book" in instructions and ".keras" in instructions and "**kwargs" in instructions


def test_init_with_edition_3_and_list_inside_show_that_track(tmp_path):
    made = run("init", "ws", "--edition", "3", cwd=tmp_path, tmp_path=tmp_path)
    assert made.returncode == 0, made.stderr
    assert "3rd edition, chapter 15" in made.stdout and "grade ch15_embedding" in made.stdout
    assert not (tmp_path / "ws" / "exercises" / "exercise1.py").exists()
    listed = run("list", "--json", cwd=tmp_path / "ws", tmp_path=tmp_path)
    assert [row["id"] for row in json.loads(listed.stdout)] == list(THIRD.exercises)
    table = run("list", cwd=tmp_path / "ws", tmp_path=tmp_path)
    assert table.returncode == 0, table.stderr
    assert "chapter 15" in table.stdout and "0 of 3 exercises passed" in table.stdout
    assert "exercise1" not in table.stdout
    assert all(len(line) <= 80 for line in table.stdout.splitlines())
    assert all(f"{e}.md" in table.stdout for e in THIRD.exercises)  # no file name broken across lines
    hint = run("hint", "ch15_encoder", cwd=tmp_path / "ws", tmp_path=tmp_path)
    assert hint.returncode == 0 and "hidden_dim" in hint.stdout, hint.stderr


def test_init_without_edition_is_the_second_edition(tmp_path):
    made = run("init", "ws", cwd=tmp_path, tmp_path=tmp_path)
    assert made.returncode == 0, made.stderr
    assert "grade exercise1" in made.stdout
    assert not any((tmp_path / "ws" / "exercises" / f"{e}.py").exists() for e in THIRD.exercises)


def test_a_number_counts_in_the_workspaces_track(tmp_path, monkeypatch):
    init_workspace(tmp_path, edition="3")
    monkeypatch.chdir(tmp_path)
    parser = grade_parser()
    assert exercise_choice(parser, "2").id == "ch15_encoder"
    exercise, path = exercise_or_file(parser, "exercises/ch15_decoder.py")
    assert exercise.id == "ch15_decoder" and path == Path("exercises/ch15_decoder.py")
    init_workspace(tmp_path / "second")
    monkeypatch.chdir(tmp_path / "second")
    assert exercise_choice(parser, "2").id == "exercise2"


def test_the_next_step_stays_in_the_track():
    assert "grade ch15_encoder" in tracks.next_step("ch15_embedding")
    assert "grade ch15_decoder" in tracks.next_step("ch15_encoder")
    assert "3rd edition, chapter 15" in tracks.next_step("ch15_decoder")
    assert "grade exercise2" in tracks.next_step("exercise1")
    assert tracks.next_step("no_such_exercise") == ""
