"""`grade batch` finds the right submissions and writes a clean results folder: nbgrader's layout,
ids, refused paths, the results files. Nothing here grades (no TensorFlow)."""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

import grader
from grader import cli
from grader.api import Settings
from grader.integrations.discovery import LayoutError, Submission, class_ids, survey
from grader.integrations.outputs import (Outputs, Result, ResultsFolderError, StartedRun, finished_rows,
                                        prepare_results_folder, refused_result)
from grader.integrations.shards import WHOLE, manifest
from grader.verdict import CheckResult, Verdict

from .text import says


def put(path: Path, text: str = "{}") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def course(tmp_path):
    """A course as a term leaves it: several assignments, stray files, an extra file in a submission."""
    root = tmp_path / "course"
    put(root / "nbgrader_config.py", "c = get_config()\n")
    put(root / "source" / "exercise3" / "exercise3.ipynb")
    put(root / "release" / "exercise3" / "exercise3.ipynb")
    put(root / "autograded" / "alice" / "exercise3" / "exercise3.ipynb")
    submitted = root / "submitted"
    put(submitted / "alice" / "exercise1" / "exercise1.ipynb")
    put(submitted / "alice" / "exercise3" / "exercise3.ipynb")
    put(submitted / "alice" / "exercise3" / "helpers.py", "x = 1\n")
    put(submitted / "alice" / "exercise3" / ".ipynb_checkpoints" / "exercise3-checkpoint.ipynb")
    put(submitted / "alice" / "exercise3" / "timestamp.txt", "2025-01-01 10:00:00")
    put(submitted / "alice-2" / "exercise3" / "exercise3.ipynb")  # a student whose name ends in -2
    put(submitted / "bob" / "notes.py", "# todo\n")
    put(submitted / "bob" / "exercise3" / "exercise3.ipynb")
    put(submitted / "carol" / "exercise1" / "exercise1.ipynb")  # handed in exercise1 only
    put(submitted / "dave" / "exercise3" / "exercise3.py", "class TransformerEncoder: pass\n")
    put(submitted / "erin" / "exercise3" / "answer.ipynb")  # the only candidate, under another name
    put(submitted / "frank" / "exercise3" / "a.ipynb")
    put(submitted / "frank" / "exercise3" / "b.py")
    (submitted / "gina" / "exercise3").mkdir(parents=True)  # handed in nothing gradable
    put(submitted / "README.txt", "collected on Monday\n")
    return root


def rows(found):
    return ({s.id: (s.student, s.path.relative_to(s.path.parents[2]).as_posix()) for s in found.submissions},
            {s.id: s.refused for s in found.refused},
            {p.path.name: p.why for p in found.skipped})


def test_a_course_folder_grades_only_its_submissions_of_the_exercise(course):
    found = survey([course], "exercise3")
    graded, refused, skipped = rows(found)
    assert graded == {
        "alice": ("alice", "alice/exercise3/exercise3.ipynb"),
        "alice-2": ("alice-2", "alice-2/exercise3/exercise3.ipynb"),
        "bob": ("bob", "bob/exercise3/exercise3.ipynb"),
        "dave": ("dave", "dave/exercise3/exercise3.py"),
        "erin": ("erin", "erin/exercise3/answer.ipynb"),
    }
    assert "several files" in refused["frank"] and "a.ipynb, b.py" in refused["frank"]
    assert refused["gina"] == "holds no .ipynb or .py file"
    assert skipped == {
        "exercise1": "another assignment (exercise1), not exercise3",
        "helpers.py": "not the file graded for alice (exercise3.ipynb)",
        "notes.py": "not in an assignment folder of bob",
        "carol": "carol has no exercise3 folder",
        "README.txt": "not in a student's folder",
    }
    assert found.searched == [(course.resolve(), course.resolve() / "submitted")]
    # every path reported exists: messages name real paths
    assert all(s.path.exists() for s in found.submissions + found.refused)
    assert all(s.path.exists() for s in found.skipped)


def test_the_other_assignment_gets_its_own_students(course):
    graded, _, skipped = rows(survey([course / "submitted"], "exercise1"))
    assert graded == {"alice": ("alice", "alice/exercise1/exercise1.ipynb"),
                      "carol": ("carol", "carol/exercise1/exercise1.ipynb")}
    assert "bob has no exercise1 folder" in skipped.values()


@pytest.mark.parametrize("below", ["submitted/bob", "submitted/bob/exercise3", "submitted/bob/exercise3/exercise3.ipynb"])
def test_folders_and_files_inside_the_layout_keep_the_student_id(course, below):
    found = survey([course / below], "exercise3")
    assert [(s.id, s.student) for s in found.submissions] == [("bob", "bob")]


def test_an_assignment_folder_of_another_exercise_is_skipped(course):
    found = survey([course / "submitted" / "alice" / "exercise1"], "exercise3")
    assert found.submissions == [] and "another assignment" in found.skipped[0].why


def test_a_course_without_submissions_is_refused_with_what_to_do(tmp_path):
    put(tmp_path / "course" / "nbgrader_config.py", "c = get_config()\n")
    put(tmp_path / "course" / "source" / "exercise3" / "exercise3.ipynb")
    with pytest.raises(LayoutError, match="without a submitted/ folder: collect the submissions first"):
        survey([tmp_path / "course"], "exercise3")


def test_symbolic_links_are_error_rows_and_never_read(course, tmp_path):
    secret = put(tmp_path / "elsewhere" / "solution.py", "SECRET = 1\n")
    submitted = course / "submitted"
    (submitted / "mallory" / "exercise3").mkdir(parents=True)
    (submitted / "mallory" / "exercise3" / "exercise3.ipynb").symlink_to(secret)
    (submitted / "oscar").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (submitted / "peggy").mkdir()
    (submitted / "peggy" / "exercise3").symlink_to(submitted / "bob" / "exercise3", target_is_directory=True)
    found = survey([course], "exercise3")
    refused = {s.id: s for s in found.refused}
    assert {"mallory", "oscar", "peggy"} <= set(refused)
    assert all(refused[name].refused == "is a symbolic link" for name in ("mallory", "oscar", "peggy"))
    assert refused["mallory"].path == submitted / "mallory" / "exercise3" / "exercise3.ipynb"
    assert secret.resolve() not in {s.path for s in found.submissions}
    row = refused_result("exercise3", refused["mallory"])
    assert row.verdict.status == "error" and row.verdict.score == 0 and row.verdict.max_score == 23
    assert "is a symbolic link, so nothing was graded" in row.verdict.error


def test_loose_files_refuse_links_and_skip_linked_folders(tmp_path):
    loose = tmp_path / "loose"
    put(loose / "a.py", "x = 1\n")
    put(loose / "group" / "b.ipynb")
    put(tmp_path / "outside" / "c.py", "x = 1\n")
    (loose / "c.py").symlink_to(tmp_path / "outside" / "c.py")
    (loose / "linked").symlink_to(tmp_path / "outside", target_is_directory=True)
    found = survey([loose], "exercise3")
    assert [(s.id, s.student) for s in found.submissions] == [("a", None), ("group_b", None)]
    assert [(s.id, s.refused) for s in found.refused] == [("c", "is a symbolic link")]
    assert [(p.path.name, p.why) for p in found.skipped] == [("linked", "a symbolic link to a folder, not followed")]


def test_every_stray_file_is_listed_wherever_it_lies(course, tmp_path):
    """A file that is no submission is listed with its path and why: beside loose submissions, in a
    student's assignment folder; nbgrader's own timestamp.txt and hidden files are not strays."""
    loose = tmp_path / "class"
    put(loose / "a.py", "x = 1\n")
    put(loose / "notes.txt", "ask about masks")
    put(loose / "group" / "data.csv", "1,2\n")
    put(loose / ".DS_Store", "")
    found = survey([loose], "exercise3")
    assert [s.id for s in found.submissions] == ["a"]
    assert [(p.path.relative_to(loose).as_posix(), p.why) for p in found.skipped] == [
        ("notes.txt", "not a .py or .ipynb file"), ("group/data.csv", "not a .py or .ipynb file")]
    put(course / "submitted" / "alice" / "exercise3" / "notes.txt", "my notes")
    skipped = {p.path.name: p.why for p in survey([course], "exercise3").skipped}
    assert skipped["notes.txt"] == "not a .py or .ipynb file, not graded for alice"
    assert "timestamp.txt" not in skipped and "exercise3-checkpoint.ipynb" not in skipped


def test_the_batch_summary_the_manifest_and_the_class_page_list_the_stray_files(tmp_path, capsys, monkeypatch):
    from grader.integrations.class_report import render
    from grader.integrations.results import read_results

    monkeypatch.setattr("grader.integrations.batch.Workers", lambda: pytest.fail("a grading worker was started"))
    submitted = tmp_path / "submitted"
    (submitted / "mallory" / "exercise3").mkdir(parents=True)
    (submitted / "mallory" / "exercise3" / "exercise3.ipynb").symlink_to(put(tmp_path / "elsewhere.ipynb"))
    notes = put(submitted / "mallory" / "exercise3" / "notes.txt", "x")
    readme = put(submitted / "README.md", "collected")
    out = tmp_path / "out"
    assert cli.main(["batch", str(submitted), "--exercise", "exercise3", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    summary = printed.split("Batch results")[1]
    assert says(summary, "Not graded: 2 paths beside the submissions:")
    assert says(summary, f"{readme}: not in a student's folder") and says(summary, str(notes))
    manifest = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert manifest["not_graded"] == [{"path": str(readme), "why": "not in a student's folder"},
                                      {"path": str(notes), "why": "not a .py or .ipynb file, not graded for mallory"}]
    from .test_class_report import Page

    assert Page(render(read_results(out))).tables["not-graded"] == [
        [str(readme), "not in a student's folder"], [str(notes), "not a .py or .ipynb file, not graded for mallory"]]
    assert (out / "students" / "mallory.html").is_file()


def test_ids_are_unique_and_never_take_another_rows_own_id(tmp_path):
    put(tmp_path / "one" / "submitted" / "alice" / "exercise3" / "exercise3.ipynb")
    put(tmp_path / "one" / "submitted" / "alice-2" / "exercise3" / "exercise3.ipynb")
    put(tmp_path / "two" / "submitted" / "alice" / "exercise3" / "exercise3.ipynb")  # another course's alice
    put(tmp_path / "loose" / "alice.py", "x = 1\n")
    put(tmp_path / "loose" / "alice-3.py", "x = 1\n")
    found = survey([tmp_path / "loose", tmp_path / "one" / "submitted", tmp_path / "two" / "submitted"], "exercise3")
    ids = {s.path.relative_to(tmp_path.resolve()).as_posix(): s.id for s in found.submissions}
    assert ids == {
        "one/submitted/alice/exercise3/exercise3.ipynb": "alice",
        "one/submitted/alice-2/exercise3/exercise3.ipynb": "alice-2",
        "loose/alice-3.py": "alice-3",
        "two/submitted/alice/exercise3/exercise3.ipynb": "alice-4",  # not alice-2 nor alice-3: others' own ids
        "loose/alice.py": "alice-5",
    }


def test_the_same_file_given_twice_is_graded_once(course):
    found = survey([course / "submitted", course / "submitted" / "bob"], "exercise3")
    assert [s.id for s in found.submissions].count("bob") == 1


def test_discover_keeps_its_contract(course):
    assert [s.id for s in survey([course / "submitted"], "exercise3").submissions] == ["alice", "alice-2", "bob", "dave", "erin"]
    with pytest.raises(FileNotFoundError):
        survey([course / "nowhere"], "exercise3").submissions


# --------------------------------------------------------------------------- the results folder


def verdict(path: str, score: float, seed: int | None = 7) -> Verdict:
    checks = [CheckResult("api.constructor", "Builds", "api", "passed" if score else "failed", score, 1.0, "")]
    return Verdict("exercise3", path, "passed" if score else "failed", score, 1.0, None, checks,
                   {"seed": seed} if seed is not None else {})


def test_outputs_remove_an_earlier_runs_results_and_sort_by_id(tmp_path):
    out = tmp_path / "out"
    put(out / "gradescope" / "zed" / "results.json")  # a student of an earlier run
    put(out / "notes.md", "kept")
    with Outputs(out) as outputs:
        for name, score in (("carol", 0.0), ("alice", 1.0), ("bob", 1.0)):
            outputs.write(Result(Submission(name, tmp_path / f"{name}.py", name), verdict(f"{name}.py", score), 1.5))
    assert sorted(p.name for p in (out / "gradescope").iterdir()) == ["alice", "bob", "carol"]
    assert (out / "notes.md").read_text() == "kept"
    summary = list(csv.DictReader((out / "summary.csv").open(encoding="utf-8")))
    assert [r["id"] for r in summary] == ["alice", "bob", "carol"]
    assert list(summary[0]) == ["id", "status", "score", "max_score", "seconds", "submission", "manual_points",
                                "manual_max_points"]
    # exercise3's written answer, graded by hand in nbgrader: the most it adds, under its name and its earlier one
    assert summary[0]["manual_max_points"] == summary[0]["manual_points"] == "2"
    lines = [json.loads(line) for line in (out / "verdicts.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [line["id"] for line in lines] == ["alice", "bob", "carol"]
    for line in lines:
        assert {"exercise", "submission", "status", "score", "max_score", "error", "checks"} <= set(line)
        assert line["student"] == line["id"] and line["seed"] == 7 and line["grader_version"] == grader.__version__
        assert line["graded_at"].endswith("+00:00") and line["manual_max_points"] == line["manual_points"] == 2.0


def test_appended_rows_join_the_sorted_run(tmp_path):
    out = tmp_path / "out"
    with Outputs(out) as outputs:
        outputs.write(Result(Submission("bob", tmp_path / "bob.py"), verdict("bob.py", 1.0), 1.0))
    refused = Submission("alice", tmp_path / "alice.ipynb", "alice", "is a symbolic link")
    with Outputs(out, append=True) as outputs:
        outputs.write(refused_result("exercise3", refused))
    summary = list(csv.DictReader((out / "summary.csv").open(encoding="utf-8")))
    assert [(r["id"], r["status"]) for r in summary] == [("alice", "error"), ("bob", "passed")]
    lines = [json.loads(line) for line in (out / "verdicts.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [line["id"] for line in lines] == ["alice", "bob"] and lines[0]["seed"] is None
    assert sorted(p.name for p in (out / "gradescope").iterdir()) == ["alice", "bob"]


def test_a_results_folder_in_use_needs_force(tmp_path):
    prepare_results_folder(tmp_path / "new")  # a new folder is fine
    (tmp_path / "empty").mkdir()
    prepare_results_folder(tmp_path / "empty")
    out = tmp_path / "out"
    put(out / "summary.csv", "id\n")
    put(out / "gradescope" / "zed" / "results.json")
    put(out / "mine.txt", "keep me")
    with pytest.raises(ResultsFolderError, match="not empty: give a new folder, or --force"):
        prepare_results_folder(out)
    prepare_results_folder(out, force=True)
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]
    with pytest.raises(ResultsFolderError, match="is a file"):
        prepare_results_folder(put(tmp_path / "file.txt", "x"))


# --------------------------------------------------------------------------- the command refuses before grading


def refused(*args: str) -> int:
    with pytest.raises(SystemExit) as stopped:
        cli.main(["batch", *args])
    return stopped.value.code


def test_the_command_refuses_instructor_mistakes_before_grading(course, tmp_path, capsys):
    out = tmp_path / "out"
    put(out / "summary.csv", "id\n")
    code = refused(str(course), "--exercise", "exercise3", "--out", str(out))
    assert code == 2 and "not empty: give a new folder, or --force" in capsys.readouterr().err
    bare = tmp_path / "bare"
    put(bare / "nbgrader_config.py", "c = get_config()\n")
    code = refused(str(bare), "--exercise", "exercise3", "--out", str(tmp_path / "new"))
    assert code == 2 and "without a submitted/ folder" in capsys.readouterr().err
    code = refused("--exercise", "exercise3", "--out", str(tmp_path / "new"))
    assert code == 2 and "give the submissions to grade" in capsys.readouterr().err
    code = refused(str(course / "nowhere"), "--exercise", "exercise3", "--out", str(tmp_path / "new"))
    assert code == 2 and "does not exist" in capsys.readouterr().err
    assert not (tmp_path / "new").exists()


def test_nothing_to_grade_is_an_error_that_lists_what_was_skipped(course, tmp_path, capsys):
    code = cli.main(["batch", str(course / "submitted" / "carol"), "--exercise", "exercise3",
                     "--out", str(tmp_path / "out")])
    printed = capsys.readouterr().out
    assert code == 2 and "No exercise3 submission found" in printed
    assert "carol has no exercise3 folder" in printed and "another assignment (exercise1)" in printed


@pytest.mark.skipif(not hasattr(os, "symlink"), reason="needs symbolic links")
def test_only_refused_rows_are_written_without_starting_a_worker(course, tmp_path, capsys, monkeypatch):
    """A student whose only submission is a link gets an error row; no grading process is needed."""
    monkeypatch.setattr("grader.integrations.batch.Workers", lambda: pytest.fail("a grading worker was started"))
    only = tmp_path / "submitted" / "mallory" / "exercise3"
    only.mkdir(parents=True)
    (only / "exercise3.ipynb").symlink_to(course / "submitted" / "bob" / "exercise3" / "exercise3.ipynb")
    code = cli.main(["batch", str(tmp_path / "submitted"), "--exercise", "exercise3", "--out", str(tmp_path / "out")])
    assert code == 0
    summary = list(csv.DictReader((tmp_path / "out" / "summary.csv").open(encoding="utf-8")))
    assert [(r["id"], r["status"], r["score"]) for r in summary] == [("mallory", "error", "0.0")]
    assert says(capsys.readouterr().out, "is a symbolic link")  # the reason, in a cell a long path wraps


def test_summary_cells_a_spreadsheet_would_run_as_formulas_stay_text(tmp_path):
    out = tmp_path / "out"
    names = ["=HYPERLINK(\"http://x\")", "+1", "-2", "@SUM(A1)", "plain"]
    with Outputs(out) as outputs:
        for name in names:
            outputs.write(Result(Submission(name, tmp_path / f"{name}.py", name), verdict(f"{name}.py", 1.0), 1.0))
    with Outputs(out, append=True) as outputs:  # rows added later keep the earlier ones
        outputs.write(Result(Submission("=late", tmp_path / "late.py", "=late"), verdict("=late.py", 0.0), 1.0))
    rows = list(csv.DictReader((out / "summary.csv").open(encoding="utf-8")))
    ids = {row["id"] for row in rows}
    assert ids == {"'=HYPERLINK(\"http://x\")", "'+1", "'-2", "'@SUM(A1)", "plain", "'=late"}
    assert all(not row["id"].startswith(("=", "+", "-", "@")) for row in rows)
    lines = [json.loads(line) for line in (out / "verdicts.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {line["id"] for line in lines} == set(names) | {"=late"}  # the JSON keeps the id as it is


# --------------------------------------------------------------------------- a run killed part way, resumed


def test_whole_results_survive_a_kill_and_what_it_cut_short_is_graded_again(tmp_path):
    out = tmp_path / "out"
    outputs = Outputs(out)
    for name in ("bob", "alice"):
        outputs.write(Result(Submission(name, tmp_path / f"{name}.py", name), verdict(f"{name}.py", 1.0), 1.0))
    outputs._jsonl.close()  # killed: the files as written, never sorted
    outputs._csv_file.close()
    with open(out / "summary.csv", "a", encoding="utf-8") as handle:
        handle.write("carol,failed,0.0,1.0,1.00,carol.py,2\r\n")  # its row, then the kill before its line
    with open(out / "summary.csv", "ab") as handle:
        handle.write("dave,failed,0.0,1.0,1.00,Zoë".encode()[:-1])  # a row cut short inside a character
    with open(out / "verdicts.jsonl", "a", encoding="utf-8") as handle:
        handle.write('{"id": "dave", "status": "pas')  # a line cut short
    assert [identity for identity, _, _ in finished_rows(out)] == ["bob", "alice"]
    with Outputs(out, append=True) as outputs:
        assert (out / "verdicts.jsonl").read_text(encoding="utf-8").count("\n") == 2  # whole lines only
        for name in ("dave", "carol"):
            outputs.write(Result(Submission(name, tmp_path / f"{name}.py", name), verdict(f"{name}.py", 0.0), 1.0))
    lines = [json.loads(line) for line in (out / "verdicts.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [line["id"] for line in lines] == ["alice", "bob", "carol", "dave"]
    summary = list(csv.DictReader((out / "summary.csv").open(encoding="utf-8")))
    assert [(r["id"], r["status"]) for r in summary] == [("alice", "passed"), ("bob", "passed"), ("carol", "failed"),
                                                         ("dave", "failed")]


def partial_run(out: Path, course: Path, graded, seed: int | None = 7):
    """A results folder of a run of the course killed after grading ``graded`` (made up verdicts)."""
    found = survey([course], "exercise3")
    planned = manifest("exercise3", WHOLE, class_ids(found), Settings(seed=seed), None)
    started = StartedRun.begin(out, planned)
    outputs = Outputs(out, started=started)
    for submission in found.submissions:
        if submission.id in graded:
            outputs.write(Result(submission, verdict(str(submission.path), 1.0, seed), 1.0))
    outputs._jsonl.close()
    outputs._csv_file.close()
    return found


@pytest.fixture
def no_grading(monkeypatch):
    monkeypatch.setattr("grader.integrations.batch.Workers", lambda *_, **__: pytest.fail("a grading worker started"))


def test_resume_refuses_a_run_made_otherwise_and_names_every_difference(course, tmp_path, capsys, no_grading):
    out = tmp_path / "out"
    partial_run(out, course, graded={"alice", "bob"})
    before = {name: (out / name).read_bytes() for name in ("verdicts.jsonl", "summary.csv", "run.started.json")}

    def resumed(*more: str) -> str:
        assert refused(str(course), "--exercise", "exercise3", "--out", str(out), "--resume", *more) == 2
        return capsys.readouterr().err

    said = resumed("--seed", "8")
    assert "holds part of another run" in said and "the seed (--seed) was 7, now 8" in said
    said = resumed("--timeout", "60", "--shard", "2/3")
    assert "the seed (--seed) was 7, now none (a fresh seed per submission)" in said
    assert "the shard (--shard) was 1/1, now 2/3" in said and "--timeout was 120.0, now 60.0" in said
    put(course / "submitted" / "zed" / "exercise3" / "exercise3.ipynb")
    assert "the class differs (zed is new)" in resumed("--seed", "7")
    assert {name: (out / name).read_bytes() for name in before} == before  # nothing written
    assert refused(str(course), "--exercise", "exercise3", "--out", str(out), "--resume", "--force") == 2
    assert "give one of them" in capsys.readouterr().err
    (out / "run.started.json").unlink()
    assert "recorded no manifest to resume from" in resumed("--seed", "7")


def test_resume_grades_only_what_has_no_verdict_and_finishes_the_run(course, tmp_path, capsys, no_grading):
    """Every gradable submission has its verdict: the resumed run starts no grading, adds the rows the
    kill kept it from writing (the refused ones), and writes the manifest and report of a finished run."""
    out = tmp_path / "out"
    found = partial_run(out, course, graded={s.id for s in survey([course], "exercise3").submissions})
    assert cli.main(["batch", str(course), "--exercise", "exercise3", "--out", str(out), "--resume", "--seed", "7"]) == 0
    assert "Resuming the run" in capsys.readouterr().out
    every = sorted(s.id for s in found.submissions + found.refused)
    summary = list(csv.DictReader((out / "summary.csv").open(encoding="utf-8")))
    assert [r["id"] for r in summary] == every
    lines = [json.loads(line) for line in (out / "verdicts.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [line["id"] for line in lines] == every
    record = json.loads((out / "run.json").read_text(encoding="utf-8"))
    assert record["class"] == every and record["seed"] == 7 and record["shard"] == {"k": 1, "n": 1}
    assert not (out / "run.started.json").exists() and (out / "report.html").is_file()
    # resumed again, the finished run has nothing left to grade and stays as it is
    assert cli.main(["batch", str(course), "--exercise", "exercise3", "--out", str(out), "--resume", "--seed", "7"]) == 0
    assert json.loads((out / "run.json").read_text(encoding="utf-8")) == record
    assert [r["id"] for r in csv.DictReader((out / "summary.csv").open(encoding="utf-8"))] == every


def test_resume_on_a_new_folder_starts_the_run(course, tmp_path, capsys, no_grading):
    gina = tmp_path / "only" / "submitted" / "gina" / "exercise3"
    gina.mkdir(parents=True)  # handed in nothing gradable: an error row, no grading
    out = tmp_path / "new"
    assert cli.main(["batch", str(tmp_path / "only"), "--exercise", "exercise3", "--out", str(out), "--resume"]) == 0
    assert [r["id"] for r in csv.DictReader((out / "summary.csv").open(encoding="utf-8"))] == ["gina"]
    assert (out / "run.json").is_file() and not (out / "run.started.json").exists()
