"""`grade batch`: the same verdicts as grading one at a time, in one run, with every output file readable."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys

import pytest

from grader import exercises
from grader.integrations.batch import run_batch
from grader.integrations.discovery import survey
from grader.integrations.class_report import plural
from grader.api import Settings

from grader.sandbox.process import Child

from .conftest import JOBS, ExpireAt, grade_many

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
TIMEOUT = 60
# The endless one loops in its first call, in the phase that builds the layer: its clock is run out there
# (the verdict of a limit reached inside that loop) once every other submission has its result, so the
# batch shows that nobody waited for it, without waiting out a limit on the wall clock.
ENDLESS_PHASE = "variables"


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    from grader.workers import Workers

    folder = tmp_path_factory.mktemp("class")
    for name, source in MIXED.items():
        (folder / f"{name}.py").write_text(source, encoding="utf-8")
    out = tmp_path_factory.mktemp("out")
    order = []
    workers = ExpireAt(Workers(), ENDLESS_PHASE, ready=lambda: len(order) == len(MIXED) - 1,
                       sources=[MIXED["endless"]])

    def on_result(result):
        order.append(result.submission.id)
        workers.release()

    try:
        results = run_batch("exercise3", survey([folder], "exercise3").submissions, out, Settings(timeout=TIMEOUT), jobs=2,
                            on_result=on_result, workers=workers)
    finally:
        workers.close()
    return folder, out, {r.submission.id: r for r in results}, order


def test_batch_verdicts_equal_single_verdicts(batch):
    """Each submission graded alone by a fresh grading process, as ``grade`` grades it (the endless one
    ended in the same phase)."""
    folder, _, results, _ = batch
    paths = {(folder / f"{name}.py").resolve(): name for name in MIXED}
    single = {paths[path]: verdict for path, verdict in grade_many("exercise3", list(paths), Settings(timeout=TIMEOUT),
                                                                  jobs=JOBS, runner=ExpireAt(Child, ENDLESS_PHASE,
                                                                                             sources=[MIXED["endless"]]))}
    for name in MIXED:
        alone = single[name]
        together = results[name].verdict
        assert together.status == alone.status, name
        assert [(c.id, c.status, c.points) for c in together.checks] == \
            [(c.id, c.status, c.points) for c in alone.checks], name
        assert (together.error is None) == (alone.error is None), name
    assert results["correct"].verdict.status == "passed"
    assert results["forges"].verdict.status == "failed"


def test_a_hostile_submission_costs_only_its_own_time_limit(batch):
    _, _, results, order = batch
    assert results["endless"].verdict.status == "failed"
    assert any(c.status == "timeout" for c in results["endless"].verdict.checks)
    # nobody waited for the endless one: it started third, its clock runs out only once every other
    # submission has its result, and every other result came before it (a scheduler that waited for
    # it would have had its verdict first, at its limit)
    assert order[-1] == "endless"
    # and it was ended inside its loop, by its clock: built, then every check that needs a call timed out
    statuses = {c.id: c.status for c in results["endless"].verdict.checks}
    assert statuses.pop("api.constructor") == "passed" and set(statuses.values()) == {"timeout"}


def test_output_files_parse(batch):
    _, out, results, _ = batch
    lines = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    assert len(lines) == len(MIXED)
    assert {Path_name(v["submission"]) for v in lines} == set(MIXED)
    for verdict in lines:
        assert {"version", "exercise", "submission", "status", "score", "max_score", "error", "checks", "id", "student",
                "graded_at", "seed", "grader_version", "manual_points", "manual_max_points", "backend"} == set(verdict)
    rows = list(csv.DictReader((out / "summary.csv").open()))
    assert {r["id"] for r in rows} == set(MIXED)
    assert all(set(r) == {"id", "status", "score", "max_score", "seconds", "submission", "manual_points",
                          "manual_max_points"} for r in rows)
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
    found = survey([tmp_path / "submitted"], "exercise3").submissions
    assert [(s.id, s.path.name) for s in found] == [("alice", "exercise3.ipynb"), ("bob", "exercise3.ipynb")]


def test_missing_path_is_reported(tmp_path):
    with pytest.raises(FileNotFoundError):
        survey([tmp_path / "nowhere"], "exercise3").submissions


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
    # a folder of .py files has no written answer: nbgrader's note is for a course
    assert "written answer" not in result.stdout and "manual" not in result.stdout


def test_a_batch_stopped_by_sigterm_leaves_no_grading_and_no_scratch_folder(tmp_path):
    """A scheduler stopping the batch (SIGTERM) while it grades: every grading process is ended,
    every scratch folder removed, and what was finished is in the results."""
    import signal
    import time

    (tmp_path / "in").mkdir()
    for name in ("a", "b", "c"):
        (tmp_path / "in" / f"{name}.py").write_text("import time\ntime.sleep(600)\n" + STUB, encoding="utf-8")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", COLUMNS="120", TMPDIR=str(scratch))
    batch = subprocess.Popen([sys.executable, "-m", "grader", "batch", str(tmp_path / "in"), "--exercise",
                              "exercise3", "--out", str(tmp_path / "out"), "--jobs", "2"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 600  # until two gradings run: a TensorFlow import on a busy machine
    while len(list(scratch.glob("grade-scratch-*"))) < 2 and batch.poll() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(list(scratch.glob("grade-scratch-*"))) == 2, batch.stderr.read() if batch.poll() is not None else ""
    batch.send_signal(signal.SIGTERM)
    assert batch.wait(timeout=300) == 128 + signal.SIGTERM
    assert list(scratch.iterdir()) == []
    assert (tmp_path / "out" / "summary.csv").is_file()


def test_odd_file_names_get_one_row_each_and_never_stop_the_batch(tmp_path):
    """A file name that is not UTF-8, a link with such a name and a path far longer than a file
    name may be: each submission gets exactly one row, the batch its summary."""
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "a.py").write_text(SOLUTION, encoding="utf-8")
    (folder / os.fsdecode(b"caf\xe9.py")).write_text(SOLUTION, encoding="utf-8")
    (folder / os.fsdecode(b"l\xe9.py")).symlink_to(folder / "a.py")
    deep = folder / ("a" * 130)
    deep.mkdir()
    (deep / ("b" * 150 + ".py")).write_text(STUB, encoding="utf-8")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", COLUMNS="120")
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "grader", "batch", str(folder), "--exercise", "exercise3",
                             "--out", str(out), "--jobs", "2"], capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "Batch results" in result.stdout and "Traceback" not in result.stderr
    rows = list(csv.DictReader((out / "summary.csv").open(encoding="utf-8")))
    lines = [json.loads(line) for line in (out / "verdicts.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(rows) == len(lines) == 4 and len({r["id"] for r in rows}) == 4
    assert sorted(r["id"] for r in rows) == sorted(v["id"] for v in lines)
    by_status = sorted(r["status"] for r in rows)
    assert by_status == ["error", "failed", "passed", "passed"], rows
    assert all(len(r["id"]) <= 100 for r in rows)
    assert any(r["submission"].endswith("caf\\xe9.py") for r in rows)  # the bytes that are not UTF-8, escaped
    for row in rows:
        assert (out / "gradescope" / row["id"] / "results.json").is_file()


def test_students_whose_folder_names_are_odd_keep_one_row_and_one_verdict_each(tmp_path):
    course = tmp_path / "course"
    (course / "source").mkdir(parents=True)
    (course / "nbgrader_config.py").write_text("c = get_config()\n", encoding="utf-8")
    names = [os.fsdecode(b"bad\xff"), "new\nline", "ok"]
    for name in names:
        folder = course / "submitted" / name / "exercise3"
        folder.mkdir(parents=True)
        (folder / "exercise3.py").write_text(STUB, encoding="utf-8")
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "grader", "batch", str(course), "--exercise", "exercise3",
                             "--out", str(out)], capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", COLUMNS="120"))
    assert result.returncode == 0, result.stderr
    rows = list(csv.DictReader((out / "summary.csv").open(encoding="utf-8", newline="")))
    lines = [json.loads(line) for line in (out / "verdicts.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sorted(v["student"] for v in lines) == sorted(names)
    assert len(rows) == 3 and sorted(r["id"] for r in rows) == sorted(["bad\\xff", "new\nline", "ok"])


def test_links_and_special_files_are_never_read(tmp_path):
    from grader import exercises
    from grader.integrations.outputs import refused_result
    from grader.integrations.discovery import survey

    solutions = exercises.get("exercise3").solution.parent
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "honest.py").write_text(STUB, encoding="utf-8")
    (folder / "linked.py").symlink_to(solutions / "exercise3.py")
    os.mkfifo(folder / "pipe.py")  # opening it for reading would block forever
    found = survey([folder], "exercise3")
    assert [s.id for s in found.refused] == ["linked"]
    assert "symbolic link" in refused_result("exercise3", found.refused[0]).verdict.error
    results = {r.submission.id: r.verdict for r in run_batch("exercise3", found.submissions, tmp_path / "out",
                                                               Settings(timeout=TIMEOUT), jobs=2)}
    assert results["pipe"].status == "error" and "is not a file" in results["pipe"].error
    assert results["honest"].status == "failed"


@pytest.mark.slow
def test_a_worker_that_dies_or_stalls_is_replaced_and_the_batch_goes_on(tmp_path):
    """The test itself kills the worker after the first result, then stops it (SIGSTOP) after the
    third: every submission still gets its verdict, from a new worker, and no worker is left."""
    from grader.workers import Workers

    folder = tmp_path / "class"
    folder.mkdir()
    names = ["a_correct", "b_stub", "c_correct", "d_shared", "e_correct"]
    for name, source in zip(names, [SOLUTION, STUB, SOLUTION, SHARED, SOLUTION]):
        (folder / f"{name}.py").write_text(source, encoding="utf-8")
    workers = Workers(fork_seconds=10)
    seen: list[int] = []

    def sabotage(result):
        seen.append(workers.pid)
        if len(seen) == 1:
            os.kill(workers.pid, signal.SIGKILL)
        elif len(seen) == 3:
            os.kill(workers.pid, signal.SIGSTOP)

    try:
        results = run_batch("exercise3", survey([folder], "exercise3").submissions, tmp_path / "out",
                            Settings(timeout=TIMEOUT), jobs=1, on_result=sabotage, workers=workers)
        replaced = workers.server.replaced
    finally:
        workers.close()
    statuses = {r.submission.id: r.verdict.status for r in results}
    assert statuses == {"a_correct": "passed", "b_stub": "failed", "c_correct": "passed", "d_shared": "failed",
                        "e_correct": "passed"}
    # a new worker served after the kill, and another after the stop (a slow machine may replace more)
    assert seen[1] != seen[0] and seen[3] != seen[2] and replaced >= 2
    for pid in set(seen):
        assert not os.path.exists(f"/proc/{pid}") or open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] == "Z"


def _descendants(pid: int) -> set[int]:
    """The processes under ``pid``, from /proc."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                parents[int(entry)] = int(open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                pass
    found, frontier = set(), {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def _alive(pid: int) -> bool:
    try:
        return open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
def test_a_batch_killed_part_way_resumes_to_what_an_uninterrupted_run_gives(tmp_path, capsys):
    """SIGKILL of `grade batch` once a few verdicts are written, then `grade batch --resume`: the same
    verdicts, rows, Gradescope files, report and manifest as one run that was never interrupted,
    every submission once."""
    import time

    from grader import cli
    from grader.integrations.outputs import finished_rows

    from .catalog.exercise3 import MISTAKES
    from .conftest import SharedWorkers
    from .test_shards import gradescope_files, summary_rows, timeless_report, verdict_lines
    from .text import says

    mistakes = {m.name: m.source for m in MISTAKES}
    sources = {"a_correct": SOLUTION, "b_stub": STUB, "c_shared_norm": mistakes["shared_norm"],
               "d_ignored_mask": mistakes["ignored_mask"], "e_pre_norm": mistakes["pre_norm"],
               "f_broken": "class TransformerEncoder(:\n", "g_no_relu": mistakes["no_relu"],
               "h_wrong_mask_axis": mistakes["wrong_mask_axis"]}
    folder = tmp_path / "class"
    folder.mkdir()
    for name, source in sources.items():
        (folder / f"{name}.py").write_text(source, encoding="utf-8")
    options = [str(folder), "--exercise", "exercise3", "--seed", "11", "--jobs", "2", "--timeout", "120"]
    killed, whole = tmp_path / "killed", tmp_path / "whole"
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", COLUMNS="120", TMPDIR=str(scratch))
    batch = subprocess.Popen([sys.executable, "-m", "grader", "batch", *options, "--out", str(killed)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 900  # a TensorFlow import and three gradings on a busy machine
    while len(finished_rows(killed)) < 3 and batch.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    under = _descendants(batch.pid)
    batch.kill()
    assert batch.wait() == -signal.SIGKILL, batch.stderr.read()
    kept = finished_rows(killed)
    assert 3 <= len(kept) < len(sources)
    assert (killed / "run.started.json").is_file() and not (killed / "run.json").exists()
    deadline = time.monotonic() + 120
    while any(_alive(pid) for pid in under) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not [pid for pid in under if _alive(pid)]  # nothing of the killed batch grades on

    with pytest.MonkeyPatch.context() as patch:  # both runs fork from this run's worker
        patch.setattr("grader.integrations.batch.Workers", SharedWorkers)
        assert cli.main(["batch", *options, "--out", str(killed), "--resume"]) == 0
        assert cli.main(["batch", *options, "--out", str(whole)]) == 0
    said = capsys.readouterr().out
    assert says(said, f"{plural(len(kept), 'submission')} graded there already, {len(sources) - len(kept)} to go")
    earlier = {identity: json.loads(line)["graded_at"] for identity, _, line in kept}
    resumed = [json.loads(line) for line in (killed / "verdicts.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [line["id"] for line in resumed] == sorted(sources)  # each once
    assert {line["id"]: line["graded_at"] for line in resumed if line["id"] in earlier} == earlier  # kept as they were
    assert verdict_lines(killed) == verdict_lines(whole)
    assert summary_rows(killed) == summary_rows(whole)
    assert gradescope_files(killed) == gradescope_files(whole)
    assert timeless_report(killed) == timeless_report(whole)
    assert json.loads((killed / "run.json").read_text()) == json.loads((whole / "run.json").read_text())
    assert not (killed / "run.started.json").exists()
