"""Control groups leave nothing behind: a grader removes its own when it ends, a signal included, and
the groups of a grader that was killed outright are removed by the next one that starts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader import exercises
from grader.sandbox import cgroups


def _hierarchy_folders() -> list[str]:
    """The folders where this machine lets the grader make groups (one per controller), or a skip."""
    hierarchy, why = cgroups.hierarchy()
    if hierarchy is None:
        pytest.skip(f"no control groups for the grader here: {why}")
    return sorted({os.path.dirname(folder) for folder in hierarchy.folders.values()})


def _dead_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_the_groups_of_a_grader_that_is_gone_are_removed_and_nothing_else(tmp_path):
    folders = _hierarchy_folders()
    dead, alive = _dead_pid(), os.getpid()
    made = []
    for folder in folders:
        stale = Path(folder) / f"grade-{dead}-0123abcd"
        (stale / "g1").mkdir(parents=True)  # a grading's group inside it, empty of processes
        live = Path(folder) / f"grade-{alive}-fedc4321"
        live.mkdir()
        other = Path(folder) / "grade-something-else"
        other.mkdir()
        made += [stale, live, other]
    try:
        removed = sorted(path for folder in folders for path in cgroups.remove_stale(folder))
        assert removed == sorted(str(Path(folder) / f"grade-{dead}-0123abcd") for folder in folders)
        for path in made:
            assert path.exists() == ("0123abcd" not in path.name), path
    finally:
        for path in made:
            for inner in (path / "g1", path):
                try:
                    os.rmdir(inner)
                except OSError:
                    pass


def test_only_empty_grader_named_folders_whose_process_is_gone_are_removed(tmp_path):
    """remove_stale works on whatever folder it is given by name, and only on grader-named folders
    whose process is gone: a plain folder tree (not a cgroup) shows it."""
    dead = _dead_pid()
    (tmp_path / f"grade-{dead}-0123abcd" / "g2").mkdir(parents=True)
    (tmp_path / f"grade-{dead}-0123abcd" / "notes.txt").write_text("kept", encoding="utf-8")
    (tmp_path / f"grade-{dead}-abc").mkdir()  # not a grader's token
    assert cgroups.remove_stale(str(tmp_path)) == []  # a file inside: rmdir refuses, nothing lost
    assert (tmp_path / f"grade-{dead}-0123abcd" / "notes.txt").is_file()
    assert not (tmp_path / f"grade-{dead}-0123abcd" / "g2").exists()
    assert (tmp_path / f"grade-{dead}-abc").is_dir()


def test_a_grader_ended_by_sigterm_removes_its_groups(tmp_path):
    folders = _hierarchy_folders()
    submission = tmp_path / "exercise3.py"
    submission.write_text("import time\ntime.sleep(3600)\n" + exercises.get("exercise3").stub.read_text(),
                          encoding="utf-8")
    grader = subprocess.Popen([sys.executable, "-m", "grader", "exercise3", "--submission", str(submission),
                               "--json", "--timeout", "3600"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                              env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    mine: list[str] = []
    deadline = time.monotonic() + 600  # until its grading runs in a group: an import on a busy machine
    while time.monotonic() < deadline and grader.poll() is None:
        mine = [os.path.join(folder, name) for folder in folders for name in os.listdir(folder)
                if name.startswith(f"grade-{grader.pid}-")]
        if mine and all(any(entry.is_dir() for entry in os.scandir(path)) for path in mine):
            break
        time.sleep(0.2)
    assert mine, grader.stderr.read() if grader.poll() is not None else "no group appeared"
    grader.send_signal(signal.SIGTERM)
    assert grader.wait(timeout=300) == 128 + signal.SIGTERM
    assert [path for path in mine if os.path.exists(path)] == []
