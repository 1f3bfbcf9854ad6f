"""`grade list`, `grade hint` and `grade EXERCISE --watch`, as a student uses them."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader import exercises
from grader.hints import read_hints

ROOT = exercises.PROJECT_ROOT


def run(*args, cwd, state):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", COLUMNS="160", GRADE_STATE_DIR=str(state))
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=300)


@pytest.fixture
def workspace(tmp_path):
    """A student's clone: every stub, exercise 2 solved, exercise 3 with a shared norm."""
    folder = tmp_path / "clone"
    shutil.copytree(ROOT / "exercises", folder / "exercises")
    shutil.copy(ROOT / "solutions" / "exercise2.py", folder / "exercises" / "exercise2.py")
    broken = (ROOT / "solutions" / "exercise3.py").read_text(encoding="utf-8").replace(
        "self.layernorm_2 = layers.LayerNormalization()", "self.layernorm_2 = self.layernorm_1")
    (folder / "exercises" / "exercise3.py").write_text(broken, encoding="utf-8")
    return folder


def test_list_shows_state_score_and_next_step(workspace, tmp_path):
    result = run("list", cwd=workspace, state=tmp_path / "state")
    assert result.returncode == 0, result.stderr
    lines = {line.split("│")[1].strip(): line for line in result.stdout.splitlines() if "│ exercise" in line}
    assert "not started" in lines["exercise1"] and "exercise1.md" in lines["exercise1"]
    assert "passed" in lines["exercise2"] and "19/19" in lines["exercise2"]
    assert "failing" in lines["exercise3"] and "weights.two_norms" in lines["exercise3"]
    assert "1 of 5 exercises passed" in result.stdout
    again = run("list", cwd=workspace, state=tmp_path / "state")  # remembered: nothing to grade
    assert again.stdout == result.stdout


def test_list_grades_a_file_again_once_it_changes(workspace, tmp_path):
    state = tmp_path / "state"
    run("list", cwd=workspace, state=state)
    shutil.copy(ROOT / "solutions" / "exercise3.py", workspace / "exercises" / "exercise3.py")
    result = run("list", cwd=workspace, state=state)
    assert "2 of 5 exercises passed" in result.stdout


def test_hints_come_one_at_a_time(tmp_path):
    state = tmp_path / "state"
    hints = read_hints(exercises.get("exercise3").hints)
    first = run("hint", "exercise3", cwd=tmp_path, state=state)
    second = run("hint", "exercise3", cwd=tmp_path, state=state)
    assert "hint 1 of" in first.stdout and "hint 2 of" in second.stdout
    assert hints[0].split()[1] in first.stdout
    every = run("hint", "exercise3", "--all", cwd=tmp_path, state=state)
    assert all(f"hint {i} of {len(hints)}" in every.stdout for i in range(1, len(hints) + 1))
    run("hint", "exercise3", "--reset", cwd=tmp_path, state=state)
    assert "hint 1 of" in run("hint", "exercise3", cwd=tmp_path, state=state).stdout


def test_the_last_hint_repeats_and_says_so(tmp_path):
    state = tmp_path / "state"
    count = len(read_hints(exercises.get("exercise1").hints))
    for _ in range(count + 1):
        result = run("hint", "exercise1", cwd=tmp_path, state=state)
    assert f"hint {count} of {count}" in result.stdout and "last hint" in result.stdout


@pytest.mark.parametrize("exercise", list(exercises.EXERCISES))
def test_every_exercise_has_hints(exercise):
    assert len(read_hints(exercises.get(exercise).hints)) >= 3


def test_unknown_exercise_for_hints(tmp_path):
    result = run("hint", "exercise9", cwd=tmp_path, state=tmp_path)
    assert result.returncode == 2 and "unknown exercise" in result.stderr


def test_watch_grades_again_after_each_save(tmp_path):
    import queue
    import threading

    submission = tmp_path / "exercise3.py"
    submission.write_text(exercises.get("exercise3").stub.read_text(encoding="utf-8"), encoding="utf-8")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", COLUMNS="120", GRADE_STATE_DIR=str(tmp_path / "state"))
    process = subprocess.Popen(
        [sys.executable, "-m", "grader", "exercise3", "--submission", str(submission), "--watch"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()
    seen: list[str] = []

    def read_until(marker: str, count: int, limit: float = 120):
        deadline = time.monotonic() + limit
        while sum(marker in line for line in seen) < count:
            try:
                seen.append(lines.get(timeout=max(0.1, deadline - time.monotonic())))
            except queue.Empty:
                raise AssertionError("no report in time:\n" + "".join(seen)[-3000:]) from None

    try:
        read_until("Watching", 1)
        assert any("Score 0/23" in line for line in seen)
        shutil.copy(ROOT / "solutions" / "exercise3.py", submission)
        read_until("Watching", 2)
        assert any("Score 23/23" in line for line in seen)
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(timeout=120)
    assert process.returncode == 0  # the last grading passed


def test_watch_and_json_do_not_mix(tmp_path):
    result = run("exercise3", "--watch", "--json", cwd=tmp_path, state=tmp_path)
    assert result.returncode == 2 and "--watch" in result.stderr


def test_watch_grades_each_new_content_once_whenever_it_was_saved(tmp_path):
    import io
    from types import SimpleNamespace

    from rich.console import Console
    from watchfiles import Change

    from grader.cli import watch_loop

    submission = tmp_path / "exercise3.py"
    submission.write_text("version 1")
    graded: list[str] = []

    def grade_once():
        graded.append(submission.read_text())
        return SimpleNamespace(exit_code=len(graded))

    def wakeups():
        submission.write_text("version 2")  # saved during the first grading: no event was seen
        yield set()  # a quiet second
        yield set()
        os.utime(submission)  # touched, same text
        yield {(Change.modified, str(submission))}
        submission.unlink()  # an editor replacing the file
        yield {(Change.deleted, str(submission))}
        submission.write_text("version 2")
        yield {(Change.added, str(submission))}
        submission.write_text("version 3")
        yield {(Change.modified, str(submission))}
        raise KeyboardInterrupt

    console = Console(file=io.StringIO(), width=100)
    assert watch_loop(submission, wakeups(), grade_once, console) == 3
    assert graded == ["version 1", "version 2", "version 3"]
    assert console.file.getvalue().count("Watching") == 3


def test_watch_grades_again_through_the_warm_worker_with_the_verdict_of_a_cold_grade(tmp_path, monkeypatch):
    """Each grading in watch mode is a fresh child forked from one worker that imported TensorFlow
    once; its verdict is the one a cold `grade` gives the same text with the same seed."""
    import io

    import watchfiles
    from rich.console import Console

    from grader import batch, cli
    from grader.grading import Settings, grade

    monkeypatch.setenv("GRADE_STATE_DIR", str(tmp_path / "state"))
    exercise = exercises.get("exercise3")
    solution = exercise.solution.read_text(encoding="utf-8")
    shared = solution.replace("self.layernorm_2 = layers.LayerNormalization()", "self.layernorm_2 = self.layernorm_1")
    assert shared != solution
    submission = tmp_path / "watched" / "exercise3.py"
    submission.parent.mkdir()
    submission.write_text(shared, encoding="utf-8")

    forks, workers = [], []

    class CountingWorkers(batch.Workers):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            workers.append(self)

        def __call__(self, *args, **kwargs):
            child = super().__call__(*args, **kwargs)
            forks.append((self.pid, child.pid))
            return child

    def saves(*args, **kwargs):
        yield set()  # a wake-up with nothing new: no grading
        submission.write_text(solution, encoding="utf-8")
        yield {(watchfiles.Change.modified, str(submission))}
        submission.write_text(shared, encoding="utf-8")
        yield {(watchfiles.Change.modified, str(submission))}

    verdicts = []
    show = cli.grade_and_show

    def recording(*args, **kwargs):
        verdicts.append(show(*args, **kwargs))
        return verdicts[-1]

    monkeypatch.setattr(batch, "Workers", CountingWorkers)
    monkeypatch.setattr(watchfiles, "watch", saves)
    monkeypatch.setattr(cli, "grade_and_show", recording)
    settings = Settings(seed=11)
    code = cli.watch(exercise, submission, settings, Console(file=io.StringIO(), width=100))

    assert len(verdicts) == 3 and code == verdicts[-1].exit_code
    assert len(workers) == 1 and len(forks) == 3  # one worker, a fresh child forked from it per grading
    assert len({pid for _, pid in forks}) == 3 and all(worker == forks[0][0] for worker, _ in forks)
    assert workers[0].server.worker is None or workers[0].server.worker.process.poll() is not None  # closed

    cold = tmp_path / "cold" / "exercise3.py"
    cold.parent.mkdir()

    def essentials(verdict):
        return (verdict.status, verdict.score, verdict.max_score, verdict.error,
                [(c.id, c.status, c.points, c.message) for c in verdict.checks])

    for text, warm in zip((shared, solution, shared), verdicts):
        cold.write_text(text, encoding="utf-8")
        assert essentials(warm) == essentials(grade(exercise.id, cold, settings))
    assert verdicts[0].status == "failed" and verdicts[1].status == "passed"
    assert any(c.id == "weights.two_norms" and c.status == "failed" for c in verdicts[0].checks)
