"""The evidence cache the catalogue is judged from (tests/recorded.py): a replay gives the verdict the
recorded child gave, its key changes with everything the evidence depends on, and a recording that
no longer matches, or that was tampered with, is never judged."""

from __future__ import annotations

import base64
import gzip
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader import exercises
from grader.api import Grading, Settings
from grader.sandbox.process import Child

from .catalog import catalog
from .recorded import Claims, EvidenceCache, Recorder, StaleRecording, environment_digest, grade_all, replay

SEED = 11
EXERCISE = exercises.get("exercise1")


def _comparable(verdict):
    """A verdict and its header, less what differs between any two gradings of one submission: the
    time it took, what judging cost, and the user id the grading process ran as (a fresh one each)."""
    context = {k: v for k, v in verdict.context.items() if k not in ("seconds", "judge")}
    context["sandbox"] = re.sub(r"runs as user \d+", "runs as user N", context.get("sandbox", ""))
    context["confinement"] = dict(context.get("confinement", {}), uid=None)
    return verdict.to_json(), context


def _grade(cache, path, starts):
    recorder = Recorder(cache, lambda: (starts.append(1), Child)[1])
    return Grading(EXERCISE.id, path, Settings(seed=SEED), runner=recorder).finish()


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """A mistake of exercise 1 graded through a fresh grading process and recorded."""
    folder = tmp_path_factory.mktemp("recorded")
    mistake = catalog(EXERCISE.id)[0][0]
    path = folder / "submission" / "mistake.py"
    path.parent.mkdir()
    path.write_text(mistake.source, encoding="utf-8")
    cache = EvidenceCache(folder / "cache", SEED)
    starts = []
    verdict = _grade(cache, path, starts)
    return {"folder": folder, "path": path, "cache": cache, "verdict": verdict, "starts": starts,
            "mistake": mistake}


def test_a_replay_gives_the_verdict_of_the_recorded_child_and_starts_none(recorded):
    live = recorded["verdict"]
    assert recorded["starts"] == [1] and recorded["cache"].recorded == 1
    assert live.status == "failed" and live.score < live.max_score
    assert any(c.id == recorded["mistake"].failing[0] and c.status == "failed" for c in live.checks)
    again = EvidenceCache(recorded["cache"].folder, SEED)
    starts = []
    replayed = _grade(again, recorded["path"], starts)
    assert starts == [] and again.hits == 1 and again.recorded == 0
    assert _comparable(replayed) == _comparable(live)
    assert replayed.context["seconds"] == live.context["seconds"]  # the recorded child's time


def test_a_recording_is_keyed_by_the_source_the_job_the_seed_and_the_limits(recorded):
    cache = recorded["cache"]
    job = {"exercise": "exercise1", "private": [str(recorded["path"].parent)], "cells": []}
    base = cache.key(job, "x = 1\n", 120.0, 4096)
    assert cache.key(dict(job), "x = 1\n", 120.0, 4096) == base
    assert cache.key(job, "x = 2\n", 120.0, 4096) != base
    assert cache.key(dict(job, exercise="exercise3"), "x = 1\n", 120.0, 4096) != base
    assert cache.key(dict(job, private=["/elsewhere"]), "x = 1\n", 120.0, 4096) != base
    assert cache.key(job, "x = 1\n", 60.0, 4096) != base
    assert cache.key(job, "x = 1\n", 120.0, 2048) != base
    assert EvidenceCache(cache.folder, SEED + 1).key(job, "x = 1\n", 120.0, 4096) != base


def test_the_key_follows_the_grading_process_code_and_not_the_checks(tmp_path):
    package = tmp_path / "grader"
    checks = package / "exercises" / "exercise1" / "checks.py"
    for code in (package / "probe" / "code.py", package / "judge" / "code.py", checks,
                 package / "exercises" / "exercise1" / "probe.py", package / "probe" / "new.py"):
        code.parent.mkdir(parents=True, exist_ok=True)
        code.write_text("A = 1\n", encoding="utf-8")
    (package / "inputs.py").write_text("SIZE = 8\n", encoding="utf-8")
    runs = ["probe/code.py", "exercises/exercise1/probe.py", "inputs.py"]  # as grader.exercises.reads grants them
    base = environment_digest(package, runs)
    checks.write_text("A = 2\n", encoding="utf-8")
    (package / "judge" / "code.py").write_text("A = 2\n", encoding="utf-8")
    assert environment_digest(package, runs) == base  # a check edited: the recordings still hold
    (package / "exercises" / "exercise1" / "probe.py").write_text("A = 2\n", encoding="utf-8")
    assert environment_digest(package, runs) != base  # the exercise's probe runs in the child
    (package / "probe" / "code.py").write_text("A = 2\n", encoding="utf-8")
    child_edited = environment_digest(package, runs)
    assert child_edited != base
    (package / "inputs.py").write_text("SIZE = 9\n", encoding="utf-8")
    assert environment_digest(package, runs) != child_edited
    assert environment_digest(package, [*runs, "probe/new.py"]) not in (base, child_edited)


def test_the_key_covers_every_file_a_grading_process_runs_and_none_of_the_checks():
    from grader.exercises import reads

    from .recorded import PACKAGE, package_files

    covered = {path.relative_to(PACKAGE).as_posix() for path in package_files()}
    assert {"child/__main__.py", "protocol/job.py", "sandbox/landlock.py"} <= covered
    assert {f"exercises/{e}/probe.py" for e in exercises.EXERCISES} <= covered
    assert not any(path.startswith("judge/") or path.endswith("/checks.py") for path in covered)
    assert covered == {Path(p).resolve().relative_to(PACKAGE).as_posix() for p in reads.readable_files()
                       if p.endswith(".py")}


def _rewrite(cache, path, change):
    """Change a kept recording and keep it again under its key, as a run would have written it."""
    key = path.name[:-len(".evidence.gz")]
    recording = cache.load(key)
    change(recording)
    cache.store(key, recording)


def _copy(recorded, tmp_path):
    folder = tmp_path / "cache"
    shutil.copytree(recorded["cache"].folder, folder)
    (file,) = folder.glob("*.evidence.gz")
    return EvidenceCache(folder, SEED), file


def test_a_recording_whose_answer_differs_is_dropped_and_never_judged(recorded, tmp_path):
    """The parent's answer (its secret inputs and weights) must be the one the recorded child got:
    a child that computed on other numbers would be judged against the wrong reference."""
    cache, file = _copy(recorded, tmp_path)

    def other_answer(recording):
        (index,) = recording["answers"]
        answer = base64.b64decode(recording["answers"][index]).replace(b"1", b"2", 1)
        recording["answers"][index] = base64.b64encode(answer).decode("ascii")

    _rewrite(cache, file, other_answer)
    starts = []
    verdict = _grade(cache, recorded["path"], starts)
    assert verdict.status == "error" and "StaleRecording" in verdict.error and verdict.score == 0
    assert starts == [] and not file.exists()


def _as_recorded(recording):
    """A parent that answers exactly as the recorded child was answered."""
    answers = {int(i): base64.b64decode(a) for i, a in recording["answers"].items()}
    seen = []

    def respond(record):
        seen.append(record)
        return answers.get(len(seen) - 1)

    return respond


@pytest.mark.parametrize("tamper", [None, "malformed_record", "phase_repeated", "timed_out", "unfinished",
                                    "out_of_memory"])
def test_a_tampered_or_unclean_recording_is_refused(recorded, tmp_path, tamper):
    cache, file = _copy(recorded, tmp_path)
    recording = cache.load(file.name[:-len(".evidence.gz")])
    if tamper == "malformed_record":
        recording["records"][-2] = '{"event": "end", "phase": 3}\n'
    elif tamper == "phase_repeated":
        runtime = next(r for r in recording["records"] if r.startswith('{"event":"end","phase":"runtime"'))
        recording["records"].insert(-1, runtime)
    elif tamper == "timed_out":
        recording["end"]["timed_out"] = True
    elif tamper == "out_of_memory":
        recording["end"]["memory_exceeded"] = True
    elif tamper == "unfinished":
        recording["records"] = [r for r in recording["records"] if '"event":"done"' not in r]
        recording["end"]["finished"] = False
    if tamper is None:  # the recording as it was kept replays
        run = replay(recording, _as_recorded(recording))
        assert run.finished and "variables" in run.phases and run.stdout == recording["end"]["stdout"]
        return
    with pytest.raises(StaleRecording):
        replay(recording, _as_recorded(recording))


def test_a_kept_file_edited_or_cut_short_is_recorded_again(recorded, tmp_path):
    cache, file = _copy(recorded, tmp_path)
    key = file.name[:-len(".evidence.gz")]
    with gzip.open(file, "rt", encoding="utf-8") as handle:
        kept = json.load(handle)
    kept["recording"]["records"] = [r for r in kept["recording"]["records"] if '"phase":"forward"' not in r]
    with gzip.open(file, "wt", encoding="utf-8") as handle:
        json.dump(kept, handle)
    assert cache.load(key) is None
    file.write_bytes(file.read_bytes()[:100])
    assert cache.load(key) is None
    starts = []
    verdict = _grade(cache, recorded["path"], starts)
    assert starts == [1] and cache.recorded == 1 and cache.load(key) is not None
    assert _comparable(verdict) == _comparable(recorded["verdict"])


def test_a_run_that_did_not_end_cleanly_is_not_kept(recorded, tmp_path):
    """Only a run that finished is kept: one cut short (here by the submission itself; a timeout
    depends on how busy the machine was) is graded afresh every time."""
    path = tmp_path / "exits.py"
    path.write_text("import os\nos._exit(3)\n", encoding="utf-8")
    cache = EvidenceCache(tmp_path / "cache", SEED)
    recorder = Recorder(cache, lambda: Child)
    verdict = Grading(EXERCISE.id, path, Settings(seed=SEED), runner=recorder).finish()
    assert verdict.status == "error" and "could not be imported" in verdict.error
    assert cache.recorded == 0 and not list(cache.folder.glob("*.evidence.gz"))


def test_prune_removes_what_no_run_has_used_for_long_and_keeps_what_another_clone_may_need(recorded, tmp_path):
    import os
    import time

    from . import recorded as module

    cache, file = _copy(recorded, tmp_path)
    stale = cache.folder / ("0" * 64 + ".evidence.gz")
    recent = cache.folder / ("1" * 64 + ".evidence.gz")
    for path in (stale, recent):
        path.write_bytes(b"another clone's")
    long_ago = time.time() - (module.KEEP_DAYS + 1) * 86400
    os.utime(stale, (long_ago, long_ago))
    os.utime(file, (long_ago, long_ago))
    key = file.name[:-len(".evidence.gz")]
    assert cache.load(key) is not None  # used now, by this run
    cache.used.add(key)
    assert cache.prune() == 1
    assert sorted(p.name for p in cache.folder.iterdir()) == sorted([file.name, recent.name])
    assert cache.prune(everything_unused=True) == 1
    assert [p.name for p in cache.folder.iterdir()] == [file.name]


def test_a_key_is_the_same_wherever_the_clone_and_the_submissions_lie(recorded, tmp_path, monkeypatch):
    """Paths inside the project's folder or a named place are keyed by their place, the interpreter
    by its version, not its location: a fresh clone or a worktree replays what another recorded."""
    import sys

    from . import recorded as module

    job = {"exercise": "exercise1", "cells": []}
    here = EvidenceCache(tmp_path / "a", SEED, places={tmp_path / "class-a": "<catalog>"})
    there = EvidenceCache(tmp_path / "b", SEED, places={tmp_path / "elsewhere" / "class-b": "<catalog>"})
    mine = here.key(dict(job, private=[str(tmp_path / "class-a" / "exercise1")]), "x = 1\n", 120.0, 4096)
    theirs = there.key(dict(job, private=[str(tmp_path / "elsewhere" / "class-b" / "exercise1")]), "x = 1\n",
                       120.0, 4096)
    assert mine == theirs
    assert here.key(dict(job, private=[str(tmp_path / "class-b" / "exercise1")]), "x = 1\n", 120.0, 4096) != mine
    digest = environment_digest()
    monkeypatch.setattr(sys, "executable", "/somewhere/else/bin/python3")
    assert environment_digest() == digest
    assert module.evidence_folder({"GRADE_EVIDENCE_CACHE": "off"}) is None
    assert module.evidence_folder({"GRADE_EVIDENCE_CACHE": str(tmp_path)}) == tmp_path
    assert module.evidence_folder({"XDG_CACHE_HOME": str(tmp_path)}) == tmp_path / "transformer-exercises" / "evidence"


def test_refreshing_records_again_what_is_kept(recorded, tmp_path):
    cache, _ = _copy(recorded, tmp_path)
    refreshing = EvidenceCache(cache.folder, SEED, refresh=True)
    starts = []
    verdict = _grade(refreshing, recorded["path"], starts)
    assert starts == [1] and refreshing.recorded == 1 and refreshing.hits == 0
    assert _comparable(verdict)[0]["checks"] == _comparable(recorded["verdict"])[0]["checks"]


def test_a_refresh_replays_what_was_recorded_since_it_began(recorded, tmp_path):
    """Another test process of a refreshing run recorded it: replayed, not recorded a third time."""
    cache, file = _copy(recorded, tmp_path)
    with gzip.open(file, "rt", encoding="utf-8") as handle:
        since = json.load(handle)["recorded_at"]
    assert EvidenceCache(cache.folder, SEED, refresh=since + 1).load(file.name[:-len(".evidence.gz")]) is None
    refreshing = EvidenceCache(cache.folder, SEED, refresh=since)
    starts = []
    verdict = _grade(refreshing, recorded["path"], starts)
    assert starts == [] and refreshing.hits == 1 and refreshing.recorded == 0
    assert _comparable(verdict) == _comparable(recorded["verdict"])


def test_a_claim_is_one_holders_until_it_lets_go_or_ends(tmp_path):
    """Two holders (each its own open file, as two processes are) never hold one item at once; a
    holder that dies without letting go ends its claims with it."""
    mine, theirs = Claims(tmp_path / "claims"), Claims(tmp_path / "claims")
    assert mine.take("exercise1/solution") and mine.take("exercise1/solution")
    assert not theirs.take("exercise1/solution")
    assert theirs.take("exercise1/stub") and not mine.take("exercise1/stub")
    mine.release("exercise1/solution")
    assert theirs.take("exercise1/solution")
    theirs.release_all()
    holder = subprocess.Popen([sys.executable, "-c", (
        "import sys; sys.path.insert(0, sys.argv[2]); from tests.recorded import Claims; "
        "assert Claims(sys.argv[1]).take('exercise1/../x/solution'); print('held', flush=True); sys.stdin.read()"),
        str(tmp_path / "claims"), str(Path(__file__).resolve().parents[1])],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "held\n"
        assert not mine.take("exercise1/../x/solution")
    finally:
        holder.kill()
        holder.wait()
    assert mine.take("exercise1/../x/solution")  # the kernel ended the dead holder's claim
    assert {path.suffix for path in (tmp_path / "claims").iterdir()} == {".claim"}  # names are data, not paths


SHARING = """
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
from tests.recorded import Claims, grade_all

folder, me = sys.argv[2], sys.argv[3]
items = [f"item{i:02d}" for i in range(int(sys.argv[4]))]
start = len(items) * int(me) // 2
items = items[start:] + items[:start]
open(os.path.join(folder, f"ready{me}"), "w").close()  # both start together, however slow either is to start
deadline = time.monotonic() + 300
while not all(os.path.exists(os.path.join(folder, f"ready{other}")) for other in "01"):
    assert time.monotonic() < deadline, "the other process never started"
    time.sleep(0.01)


class Grading:  # recorded by whoever grades an item first, replayed by any other
    sentinel = None

    def __init__(self, item):
        self.item = item

    def ready(self):
        return True

    def advance(self):
        return True

    def finish(self):
        recording = os.path.join(folder, self.item + ".recorded")
        if os.path.exists(recording):
            return "replayed"
        time.sleep(0.02 * (1 + hash(self.item) % 3))
        with open(recording, "x") as out:  # fails if another grader recorded it meanwhile
            out.write(me)
        return "recorded"

    def close(self):
        pass


print(json.dumps(dict(grade_all(Grading, items, 2, claims=Claims(os.path.join(folder, "claims"))))))
"""


def test_processes_sharing_a_list_grade_each_item_once_and_each_gets_every_verdict(tmp_path):
    """Two test processes grading the same catalogue at once: every item is recorded by exactly one of
    them, while both grade (one of the two ways) every item."""
    count = 40
    root = str(Path(__file__).resolve().parents[1])
    processes = [subprocess.Popen([sys.executable, "-c", SHARING, root, str(tmp_path), str(me), str(count)],
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for me in (0, 1)]
    results = []
    for process in processes:
        out, err = process.communicate(timeout=600)
        assert process.returncode == 0, err
        results.append(json.loads(out))
    items = {f"item{i:02d}" for i in range(count)}
    assert all(set(result) == items for result in results)
    for item in items:
        assert sorted(result[item] for result in results) == ["recorded", "replayed"], item
    recorded_by = [(tmp_path / f"{item}.recorded").read_text() for item in sorted(items)]
    assert set(recorded_by) == {"0", "1"}  # both took part


def test_many_gradings_are_scheduled_together_and_each_gets_its_verdict(recorded, tmp_path):
    """grade_all keeps several gradings going and yields every one, a replay among fresh ones."""
    cache, _ = _copy(recorded, tmp_path)
    stub = tmp_path / "stub.py"
    stub.write_text(EXERCISE.stub.read_text(encoding="utf-8"), encoding="utf-8")
    broken = tmp_path / "broken.py"
    broken.write_text("def (:\n", encoding="utf-8")
    recorder = Recorder(cache, lambda: Child)
    items = [recorded["path"], stub, broken]
    verdicts = dict(grade_all(lambda p: Grading(EXERCISE.id, p, Settings(seed=SEED), runner=recorder), items, 3))
    assert set(verdicts) == set(items)
    assert _comparable(verdicts[recorded["path"]]) == _comparable(recorded["verdict"])
    assert verdicts[stub].status == "failed" and verdicts[stub].score == 0
    assert verdicts[broken].status == "error" and "SyntaxError" in verdicts[broken].error
    assert cache.hits == 1 and cache.recorded == 1
