"""`grade sample-class`: a small class for an instructor to try the tools on, its mistakes the
catalogue's own, its manifest the scores `grade batch` gives."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from grader import cli, exercises
from grader.integrations import sample_class
from grader.integrations.sample_class import MANIFEST, MISTAKES, sample_students, write_sample_class

from .catalog import catalog


@pytest.mark.parametrize("exercise_id", list(exercises.EXERCISES))
def test_each_sample_mistake_is_the_catalogues_mistake_of_that_name(exercise_id):
    """The package cannot import the tests: its mistakes are edits of the solution kept beside the
    command, held here to the catalogue's (whose verdicts tests/golden/ keeps)."""
    catalogued = {mistake.name: mistake for mistake in catalog(exercise_id)[0]}
    assert MISTAKES[exercise_id], f"{exercise_id} has no sample mistake"
    for mistake in MISTAKES[exercise_id]:
        assert mistake.name in catalogued, f"{mistake.name} is not a mistake of tests/catalog/{exercise_id}.py"
        assert sample_class.mistaken(exercise_id, mistake) == catalogued[mistake.name].source, mistake.name
        assert mistake.check in catalogued[mistake.name].failing, mistake.name


@pytest.mark.parametrize("exercise_id", list(exercises.EXERCISES))
def test_every_kind_of_student_is_in_the_class(exercise_id):
    students = sample_students(exercise_id)
    kinds = [student.kind for student in students]
    assert kinds.count("correct") == kinds.count("crash") == kinds.count("syntax") == 1
    assert kinds.count("stub") == kinds.count("notebook") == 1
    assert kinds.count("mistake") == len(MISTAKES[exercise_id])
    assert len({student.id for student in students}) == len(students)
    syntax = next(s for s in students if s.kind == "syntax").text
    with pytest.raises(SyntaxError):
        compile(syntax, "syntax.py", "exec")
    notebook = json.loads(next(s for s in students if s.kind == "notebook").text)
    sources = ["".join(cell["source"]) for cell in notebook["cells"]]
    assert not any("HIDDEN TESTS" in source or "BEGIN SOLUTION" in source for source in sources)


def test_a_folder_that_holds_files_is_refused_without_force(tmp_path, monkeypatch, capsys):
    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        cli.main(["sample-class", str(tmp_path)])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "is not empty" in err and "--force" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    with pytest.raises(sample_class.SampleClassError):
        write_sample_class(tmp_path, "exercise3")
    written = write_sample_class(tmp_path, "exercise3", force=True)
    assert (tmp_path / "notes.txt").read_text(encoding="utf-8") == "mine"
    for student in written:
        assert (tmp_path / student.path("exercise3")).is_file()
    assert (tmp_path / "nbgrader_config.py").is_file() and (tmp_path / "source" / "exercise3").is_dir()


def test_the_command_says_what_it_wrote_that_it_holds_answers_and_what_to_run_next(tmp_path, monkeypatch, capsys):
    """Grading left out (the slow test grades): the listing, the warning and the next commands."""
    from grader.verdict import Verdict

    def graded(folder, exercise_id, students, settings):
        return {s.id: Verdict(exercise_id, str(folder / s.path(exercise_id)), "passed", 23.0, 23.0, None, [])
                for s in students}

    monkeypatch.setattr(sample_class, "grade_students", graded)
    folder = tmp_path / "try-it"
    assert cli.main(["sample-class", str(folder), "--exercise", "3"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert f"into {folder}" in out and "holds answers" in out and "keep it away from students" in out
    assert f"grade batch {folder} --exercise exercise3 --out {folder / 'results'}" in out
    assert "nbgrader autograde exercise3" in out and "grade gradescope-autograder exercise3" in out
    manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    assert manifest["exercise"] == "exercise3" and manifest["holds_answers"] is True
    assert {row["student"] for row in manifest["students"]} == {s.id for s in sample_students("exercise3")}
    for row in manifest["students"]:
        assert (folder / row["file"]).is_file() and row["what"]


@pytest.mark.slow
def test_grade_batch_gives_the_sample_class_the_manifests_scores(tmp_path):
    """The whole loop as an instructor runs it: the command grades the class once for its manifest,
    and grade batch on the folder gives every student the manifest's status and score; a mistake
    scores as the catalogue's kept verdict says, and fails the check the manifest names."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", GRADE_STATE_DIR=str(tmp_path / "state"))
    folder, out = tmp_path / "class", tmp_path / "results"
    made = subprocess.run([sys.executable, "-m", "grader", "sample-class", str(folder)], capture_output=True,
                          text=True, env=env, timeout=1200)
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    batch = subprocess.run([sys.executable, "-m", "grader", "batch", str(folder), "--exercise", "exercise3", "--out",
                            str(out)], capture_output=True, text=True, env=env, timeout=1200)
    assert batch.returncode == 0, batch.stdout[-2000:] + batch.stderr[-2000:]
    verdicts = {v["id"]: v for v in map(json.loads, (out / "verdicts.jsonl").read_text(encoding="utf-8").splitlines())}
    assert set(verdicts) == {row["student"] for row in manifest["students"]}
    golden = json.loads((exercises.PROJECT_ROOT / "tests" / "golden" / "exercise3.json").read_text(encoding="utf-8"))
    for row in manifest["students"]:
        verdict = verdicts[row["student"]]
        assert (verdict["status"], verdict["score"], verdict["max_score"]) == \
            (row["status"], row["score"], row["max_score"]), row["student"]
        expected = {"correct": "passed", "notebook": "passed", "mistake": "failed", "stub": "failed",
                    "crash": "error", "syntax": "error"}[row["kind"]]
        assert row["status"] == expected, row
        if row["mistake"]:
            kept = golden[f"mistake_{row['mistake']}"]
            assert (row["status"], row["score"]) == (kept["status"], kept["score"]), row["student"]
            failed = {check["id"] for check in verdict["checks"] if check["status"] != "passed"}
            assert row["caught_by"] in failed, row
    assert (out / "report.html").is_file()


@pytest.mark.slow
def test_nbgrader_autograde_gives_the_sample_notebook_the_manifests_score(tmp_path):
    """The sample class is an nbgrader course as it is: generating the assignment and autograding the
    notebook student gives the autograded points the manifest states (the written answer, graded by
    hand, apart)."""
    from .test_nbgrader_course import autograded, nbgrader, scores

    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", GRADE_STATE_DIR=str(tmp_path / "state"))
    folder = tmp_path / "class"
    made = subprocess.run([sys.executable, "-m", "grader", "sample-class", str(folder)], capture_output=True,
                          text=True, env=env, timeout=1200)
    assert made.returncode == 0, made.stdout[-2000:] + made.stderr[-2000:]
    manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    (row,) = [row for row in manifest["students"] if row["kind"] == "notebook"]
    nbgrader(folder, "generate_assignment", "exercise3", "--force")
    nbgrader(folder, "autograde", "exercise3", "--student", row["student"], "--force")
    assert autograded(scores(folder, [row["student"]])[row["student"]]) == pytest.approx(row["score"])
