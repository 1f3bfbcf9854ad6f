"""The API ``grade batch`` is a thin command over (``grader.integrations.class_run``): a run is planned
before anything is graded, and grading it writes a row for every submission and the run's record."""

from __future__ import annotations

import json

import pytest

from grader.api import Settings
from grader.integrations import class_run
from grader.integrations.shards import parse_shard


def test_a_plan_refuses_a_results_folder_in_use_and_a_missing_path_before_grading(tmp_path):
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "ada.py").write_text("x = 1\n", encoding="utf-8")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(class_run.PlanError, match="is not empty"):
        class_run.plan("exercise3", [tmp_path / "class"], tmp_path / "out", Settings())
    with pytest.raises(class_run.PlanError, match="nowhere"):
        class_run.plan("exercise3", [tmp_path / "nowhere"], tmp_path / "new", Settings())
    assert (tmp_path / "out" / "notes.txt").read_text(encoding="utf-8") == "mine"  # nothing was touched
    assert not (tmp_path / "new").exists()


def test_a_share_of_a_class_counts_its_submissions_and_refused_ones(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    for name in ("ada", "bo", "cy", "di"):
        (folder / f"{name}.py").write_text("x = 1\n", encoding="utf-8")
    (folder / "eve.py").symlink_to(folder / "ada.py")  # refused: never read, an error row
    shares = [class_run.plan("exercise3", [folder], tmp_path / f"out{k}", Settings(), parse_shard(f"{k}/2"))
              for k in (1, 2)]
    assert sum(run.share for run in shares) == 5 == sum(run.to_grade for run in shares)
    assert {s.id for run in shares for s in run.found.refused} == {"eve"}


def test_grading_a_run_of_refused_submissions_writes_their_rows_and_the_record(tmp_path):
    folder = tmp_path / "class"
    folder.mkdir()
    (tmp_path / "elsewhere.py").write_text("x = 1\n", encoding="utf-8")
    (folder / "eve.py").symlink_to(tmp_path / "elsewhere.py")
    run = class_run.plan("exercise3", [folder], tmp_path / "out", Settings(seed=3))
    seen = []
    results = class_run.grade(run, jobs=1, on_result=seen.append)  # nothing to fork: no worker starts
    assert [r.submission.id for r in results] == [r.submission.id for r in seen] == ["eve"]
    assert results[0].verdict.status == "error" and "symbolic link" in results[0].verdict.error
    rows = [json.loads(line) for line in (tmp_path / "out" / "verdicts.jsonl").read_text().splitlines()]
    assert [row["status"] for row in rows] == ["error"]
    record = json.loads((tmp_path / "out" / "run.json").read_text())  # the record of a finished run
    assert record["exercise"] == "exercise3" and record["seed"] == 3
    assert not (tmp_path / "out" / "run.started.json").exists() and (tmp_path / "out" / "report.html").is_file()
