"""`grade batch`: the same verdicts as grading one at a time, in one run, with every output file readable."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
import time

import pytest

from grader import exercises
from grader.batch import discover, run_batch
from grader.grading import Settings, grade

SOLUTION = exercises.get("exercise3").solution.read_text(encoding="utf-8")
STUB = exercises.get("exercise3").stub.read_text(encoding="utf-8")
SHARED = SOLUTION.replace("self.layernorm_2 = layers.LayerNormalization()", "self.layernorm_2 = self.layernorm_1")
MIXED = {
    "correct": SOLUTION,
    "shared_norm": SHARED,
    "stub": STUB,
    "broken": "class TransformerEncoder(:\n",
    "exits": STUB + "\nimport os\nos._exit(0)\n",
    "forges": "print('{\"status\": \"passed\"}')\n" + STUB,
    "endless": SOLUTION.replace("        proj_output = self.dense_proj(proj_input)\n",
                                "        proj_output = self.dense_proj(proj_input)\n        while True:\n            pass\n"),
}
TIMEOUT = 15


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    folder = tmp_path_factory.mktemp("class")
    for name, source in MIXED.items():
        (folder / f"{name}.py").write_text(source, encoding="utf-8")
    out = tmp_path_factory.mktemp("out")
    started = time.perf_counter()
    results = run_batch("exercise3", discover([folder], "exercise3"), out, Settings(timeout=TIMEOUT), jobs=2)
    return folder, out, {r.submission.id: r for r in results}, time.perf_counter() - started


def test_batch_verdicts_equal_single_verdicts(batch):
    folder, _, results, _ = batch
    for name in MIXED:
        alone = grade("exercise3", folder / f"{name}.py", Settings(timeout=TIMEOUT))
        together = results[name].verdict
        assert together.status == alone.status, name
        assert [(c.id, c.status, c.points) for c in together.checks] == \
            [(c.id, c.status, c.points) for c in alone.checks], name
        assert (together.error is None) == (alone.error is None), name
    assert results["correct"].verdict.status == "passed"
    assert results["forges"].verdict.status == "failed"


def test_a_hostile_submission_costs_only_its_own_time_limit(batch):
    _, _, results, seconds = batch
    assert results["endless"].verdict.status == "failed"
    assert any(c.status == "timeout" for c in results["endless"].verdict.checks)
    others = [r.seconds for name, r in results.items() if name != "endless"]
    assert max(others) < TIMEOUT  # nobody waited for the endless one
    assert seconds < TIMEOUT + 60


def test_output_files_parse(batch):
    _, out, results, _ = batch
    lines = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    assert len(lines) == len(MIXED)
    assert {Path_name(v["submission"]) for v in lines} == set(MIXED)
    for verdict in lines:
        assert set(verdict) == {"exercise", "submission", "status", "score", "max_score", "error", "checks"}
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert {r["id"] for r in rows} == set(MIXED)
    assert all(set(r) == {"id", "status", "score", "max_score", "seconds", "submission"} for r in rows)
    for name in MIXED:
        gradescope = json.loads((out / "gradescope" / name / "results.json").read_text())
        assert gradescope["score"] == results[name].verdict.score
        assert all({"name", "score", "max_score", "status"} <= set(t) for t in gradescope["tests"])


def Path_name(path: str) -> str:
    return os.path.splitext(os.path.basename(path))[0]


def test_nbgrader_layout_gives_student_ids(tmp_path):
    for student in ("alice", "bob"):
        folder = tmp_path / "submitted" / student / "exercise3"
        folder.mkdir(parents=True)
        (folder / "exercise3.ipynb").write_text("{}", encoding="utf-8")
    (tmp_path / "submitted" / "bob" / "exercise3" / ".ipynb_checkpoints").mkdir()
    (tmp_path / "submitted" / "bob" / "exercise3" / ".ipynb_checkpoints" / "exercise3-checkpoint.ipynb").write_text("{}")
    found = discover([tmp_path / "submitted"], "exercise3")
    assert [(s.id, s.path.name) for s in found] == [("alice", "exercise3.ipynb"), ("bob", "exercise3.ipynb")]


def test_missing_path_is_reported(tmp_path):
    with pytest.raises(FileNotFoundError):
        discover([tmp_path / "nowhere"], "exercise3")


def test_batch_command_shows_progress_and_summary(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "a.py").write_text(SOLUTION, encoding="utf-8")
    (tmp_path / "in" / "b.py").write_text(STUB, encoding="utf-8")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", COLUMNS="120")
    result = subprocess.run([sys.executable, "-m", "grader", "batch", str(tmp_path / "in"), "--exercise", "exercise3",
                             "--out", str(tmp_path / "out"), "--jobs", "2"], capture_output=True, text=True, env=env,
                            timeout=300)
    assert result.returncode == 0, result.stderr
    assert "1 passed" in result.stdout and "1 failed" in result.stdout and "Batch results" in result.stdout
    assert result.stderr.strip() == ""  # TensorFlow's start-up noise stays in the worker
