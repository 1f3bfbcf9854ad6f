"""`grade list`, `grade hint` and `grade EXERCISE --watch`, as a student uses them."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from grader import exercises
from grader.student.hints import read_tagged_hints
from grader.judging.declarations import declared_checks

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


def test_list_shows_state_score_and_next_step_and_grades_a_changed_file_again(workspace, tmp_path):
    result = run("list", cwd=workspace, state=tmp_path / "state")
    assert result.returncode == 0, result.stderr
    lines = {line.split("│")[1].strip(): line for line in result.stdout.splitlines() if "│ exercise" in line}
    assert "not started" in lines["exercise1"] and "exercise1.md" in lines["exercise1"]
    assert "passed" in lines["exercise2"] and "19/19" in lines["exercise2"]
    assert "failing" in lines["exercise3"] and "weights.two_norms" in lines["exercise3"]
    assert "1 of 5 exercises passed" in result.stdout
    again = run("list", cwd=workspace, state=tmp_path / "state")  # remembered: nothing to grade
    assert again.stdout == result.stdout
    # a file that changes is graded again
    shutil.copy(ROOT / "solutions" / "exercise3.py", workspace / "exercises" / "exercise3.py")
    changed = run("list", cwd=workspace, state=tmp_path / "state")
    assert "2 of 5 exercises passed" in changed.stdout


def test_a_hint_answers_the_first_cause_and_grows_more_detailed(workspace, tmp_path, monkeypatch):
    """exercise 3 with a shared norm: the hints for weights.two_norms, least revealing first; the
    second call reuses the remembered grading of the unchanged file."""
    from grader.student import progress

    state = tmp_path / "state"
    first = run("hint", "exercise3", cwd=workspace, state=state)
    assert first.returncode == 0, first.stderr
    assert "for weights.two_norms" in first.stdout and "LayerNormalization() instances" in first.stdout
    assert "Your report starts with weights.two_norms" in first.stdout
    monkeypatch.setenv("GRADE_STATE_DIR", str(state))
    remembered = progress.last_verdict(workspace / "exercises" / "exercise3.py")
    assert remembered["causes"][0][0] == "weights.two_norms"
    assert "gradients.norms_differ" in remembered["causes"][0]
    every = run("hint", "exercise3", "--all", cwd=workspace, state=state)
    count = len(read_tagged_hints(exercises.get("exercise3").hints))
    assert all(f"hint {i} of {count}" in every.stdout for i in range(1, count + 1))
    assert "Checks:" not in every.stdout  # the tags choose hints; students read the hints


def test_hint_alone_chooses_the_exercise_graded_last_and_numbers_the_hints_of_its_cause(workspace, tmp_path):
    """`grade hint` without an exercise: refused, naming `grade hint EXERCISE`, until an exercise of
    the workspace was graded; then that one. A cause with one hint gets "hint 1 of 1" and "the only
    hint", not its place in the file nor "the most detailed"."""
    state = tmp_path / "state"
    none_yet = run("hint", cwd=workspace, state=state)
    assert none_yet.returncode == 2 and "grade hint EXERCISE" in none_yet.stderr, none_yet.stderr
    assert "no exercise was graded" in none_yet.stderr
    first = run("hint", "exercise3", cwd=workspace, state=state)  # grades exercise 3
    assert first.returncode == 0, first.stderr
    tagged = [h for h in read_tagged_hints(exercises.get("exercise3").hints) if "weights.two_norms" in h.checks]
    assert len(tagged) == 1 and tagged[0].number > 1  # the case a count over the whole file got wrong
    words = " ".join(first.stdout.split())
    assert "hint 1 of 1, for weights.two_norms" in words and "That is the only hint for it" in words
    assert "most detailed" not in words and f"hint {tagged[0].number} of" not in words
    again = run("hint", cwd=workspace, state=state)  # the exercise graded last, its grading remembered
    assert again.returncode == 0, again.stderr
    assert "exercise3 — hint 1 of 1, for weights.two_norms" in " ".join(again.stdout.split())


def test_the_exercise_graded_last_is_the_latest_of_the_workspace(tmp_path, monkeypatch):
    import json

    from grader.student import progress

    monkeypatch.setenv("GRADE_STATE_DIR", str(tmp_path))
    folder, elsewhere = tmp_path / "ws" / "exercises", tmp_path / "other" / "exercises"
    assert progress.last_graded_exercise(folder, exercises.EXERCISES) is None
    verdicts = {str(folder / "exercise3.py"): {"exercise": "exercise3", "graded_at": 20.0},
                str(folder / "exercise1.py"): {"exercise": "exercise1", "graded_at": 10.0},
                str(elsewhere / "exercise2.py"): {"exercise": "exercise2", "graded_at": 30.0}}
    (tmp_path / "progress.json").write_text(json.dumps({"verdicts": verdicts}), encoding="utf-8")
    assert progress.last_graded_exercise(folder, exercises.EXERCISES) == "exercise3"
    assert progress.last_graded_exercise(elsewhere, exercises.EXERCISES) == "exercise2"


def test_a_stub_gets_the_hint_for_its_first_step(tmp_path):
    state = tmp_path / "state"
    submission = tmp_path / "exercise1.py"
    shutil.copy(exercises.get("exercise1").stub, submission)
    result = run("hint", "exercise1", "--submission", str(submission), cwd=tmp_path, state=state)
    assert result.returncode == 0, result.stderr
    assert "hint 1 of" in result.stdout and "for api.constructor" in result.stdout
    solved = tmp_path / "solved.py"
    shutil.copy(exercises.get("exercise1").solution, solved)
    done = run("hint", "exercise1", "--submission", str(solved), cwd=tmp_path, state=state)
    assert "no hint needed" in done.stdout


def test_hints_of_one_cause_go_from_least_to_most_revealing_and_the_last_repeats():
    from grader.student.hints import choose, read_tagged_hints

    hints = read_tagged_hints(exercises.get("exercise3").hints)
    cause = ["mask.masks_keys", "mask.padding_invariance"]
    shown = [choose(hints, cause, n)[0].number for n in range(4)]
    assert shown[0] < shown[1] and shown[1] == shown[2] == shown[3]  # two hints for it, the last repeats
    assert "axis=1" not in hints[shown[0] - 1].text and "axis=1" in hints[shown[1] - 1].text
    assert choose(hints, ["mask.propagates"], 0)[0].text.count("supports_masking") == 1
    assert choose(hints, ["no.such_check"], 0) is None


@pytest.mark.parametrize("exercise", list(exercises.EXERCISES))
def test_every_check_and_every_catalogued_mistake_has_a_hint(exercise):
    from grader.student.hints import read_tagged_hints

    from .catalog import catalog

    hints = read_tagged_hints(exercises.get(exercise).hints)
    tagged = {check_id for hint in hints for check_id in hint.checks}
    declared = {d["id"] for d in declared_checks(exercises.get(exercise))}
    assert tagged <= declared, f"hints name checks that do not exist: {sorted(tagged - declared)}"
    assert declared <= tagged, f"no hint helps with {sorted(declared - tagged)}"
    for mistake in catalog(exercise)[0]:
        assert tagged & set(mistake.failing), mistake.name


@pytest.mark.parametrize("exercise", list(exercises.EXERCISES))
def test_every_exercise_has_hints(exercise):
    assert len(read_tagged_hints(exercises.get(exercise).hints)) >= 3


def test_unknown_exercise_for_hints(tmp_path):
    result = run("hint", "exercise9", cwd=tmp_path, state=tmp_path)
    assert result.returncode == 2 and "unknown exercise" in result.stderr


def test_watch_grades_again_after_each_save(tmp_path):
    import queue
    import threading

    submission = tmp_path / "exercise3.py"
    submission.write_text(exercises.get("exercise3").stub.read_text(encoding="utf-8"), encoding="utf-8")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", COLUMNS="120", GRADE_STATE_DIR=str(tmp_path / "state"))
    # Ctrl-C as a terminal delivers it, whatever this run inherited: a shell starts a background
    # job with SIGINT ignored, and Python keeps an ignored SIGINT ignored
    process = subprocess.Popen(
        [sys.executable, "-m", "grader", "exercise3", "--submission", str(submission), "--watch"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()
    seen: list[str] = []

    def read_until(marker: str, count: int, limit: float = 600):
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
        process.wait(timeout=600)
    assert process.returncode == 0  # the last grading passed


def test_watch_and_json_do_not_mix(tmp_path):
    result = run("exercise3", "--watch", "--json", cwd=tmp_path, state=tmp_path)
    assert result.returncode == 2 and "--watch" in result.stderr


def test_watch_grades_each_new_content_once_whenever_it_was_saved(tmp_path):
    import io
    from types import SimpleNamespace

    from rich.console import Console
    from watchfiles import Change

    from grader.cli.grading import watch_loop

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


@pytest.mark.slow
def test_watch_grades_again_through_the_warm_worker_with_the_verdict_of_a_cold_grade(tmp_path, monkeypatch):
    """Each grading in watch mode is a fresh child forked from one worker that imported TensorFlow
    once; its verdict is the one a cold `grade` gives the same text with the same seed."""
    import io

    import watchfiles
    from rich.console import Console

    from grader import workers as warm
    from grader.cli import grading as cli
    from grader.api import Settings, grade

    monkeypatch.setenv("GRADE_STATE_DIR", str(tmp_path / "state"))
    exercise = exercises.get("exercise3")
    solution = exercise.solution.read_text(encoding="utf-8")
    shared = solution.replace("self.layernorm_2 = layers.LayerNormalization()", "self.layernorm_2 = self.layernorm_1")
    assert shared != solution
    submission = tmp_path / "watched" / "exercise3.py"
    submission.parent.mkdir()
    submission.write_text(shared, encoding="utf-8")

    forks, workers = [], []

    class CountingWorkers(warm.Workers):
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

    monkeypatch.setattr(warm, "Workers", CountingWorkers)
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


def test_watch_mode_shows_each_report_in_place_under_one_status_line(tmp_path, monkeypatch):
    import io

    from rich.console import Console
    from watchfiles import Change

    from grader import api as grading
    from grader.cli import grading as cli
    from grader.verdict import CheckResult, summarise

    verdict = summarise("exercise3", str(tmp_path / "exercise3.py"), [
        CheckResult("api.constructor", "Builds", "api", "failed", 0, 1, "Observed: x\nExpected: y\nWhy it matters: z")],
        {"title": "The Transformer encoder", "seed": 0, "timeout": 120.0, "memory_mb": 4096})

    class Finished:
        def __init__(self, *args, **kwargs):
            pass

        def finish(self):
            return verdict

    monkeypatch.setattr(grading, "Grading", Finished)
    monkeypatch.setenv("GRADE_STATE_DIR", str(tmp_path / "state"))
    submission = tmp_path / "exercise3.py"
    submission.write_text("version 1")

    def wakeups():
        submission.write_text("version 2")
        yield {(Change.modified, str(submission))}
        raise KeyboardInterrupt

    console = Console(file=io.StringIO(), width=100, force_terminal=True, color_system=None)
    def grade_once():
        return cli.grade_and_show(exercises.get("exercise3"), submission, None, console, watching=True)

    cli.watch_loop(submission, wakeups(), grade_once, console)
    screens = console.file.getvalue().split("\x1b[2J")
    assert len(screens) == 3 and "Transformer encoder" not in screens[0]  # each report on a cleared screen
    for screen in screens[1:]:
        assert screen.count("exercise3 — The Transformer encoder") == 1
        status = [line for line in screen.splitlines() if "Watching" in line]
        assert len(status) == 1 and re.search(r"saved \d\d:\d\d:\d\d · graded in \d+\.\d s", status[0])
        assert "save: the grader runs again." in " ".join(screen.split())
