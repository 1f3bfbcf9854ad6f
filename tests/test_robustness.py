"""Exactly one verdict per submission: whatever a child sends, and whatever fails in the grader for it.

These drive the parent with fake children (plain ChildRun data, no TensorFlow), so each failure is
exactly the one under test.
"""

from __future__ import annotations

import json
import os
import threading
import warnings
from pathlib import Path

import pytest

from grader import exercises
from grader.integrations.outputs import Outputs
from grader.integrations.discovery import Submission
from grader.integrations.batch import run_batch
from grader.judging.declarations import declared_checks
from grader.judging.plugin import ChecksOverran, Watchdog, run_checks
from grader.api import Grading, Settings
from grader.sandbox.evidence import ChildRun

STUB = exercises.get("exercise3").stub.read_text(encoding="utf-8")
RUNTIME = {"event": "end", "phase": "runtime", "ok": True, "error": None,
           "data": {"python": "3.11", "tensorflow": "2.21.0", "keras": "3.15.1", "numpy": "2", "sandbox": {}}}
LOAD = {"event": "end", "phase": "load", "ok": True, "error": None,
        "data": {"class_name": "TransformerEncoder", "class_found": True, "is_class": True, "is_callable": True,
                 "is_layer_subclass": True, "bases": [], "defined_names": ["TransformerEncoder"],
                 "signature_error": None}}


class FakeChild:
    """A child that has already ended with ``run``."""

    sentinel = None

    def __init__(self, run: ChildRun):
        self.run = run
        self.killed = False

    def wait(self) -> ChildRun:
        return self.run

    def ready(self) -> bool:
        return True

    def seconds_left(self) -> float:
        return 0.0

    def kill(self) -> None:
        self.killed = True


def fake_runner(run: ChildRun, started: list | None = None):
    def runner(job, source, timeout, memory_mb, respond=None):
        child = FakeChild(run)
        if started is not None:
            started.append(child)
        return child
    return runner


def _submission(tmp_path: Path, source: str = STUB, name: str = "exercise3.py") -> Path:
    path = tmp_path / name
    path.write_text(source, encoding="utf-8")
    return path


def test_a_runner_that_fails_gives_an_error_verdict(tmp_path):
    def broken(*args, **kwargs):
        raise OSError(24, "Too many open files")

    verdict = Grading("exercise3", _submission(tmp_path), runner=broken).finish()
    assert verdict.status == "error" and "could not start the grading process" in verdict.error
    assert "Too many open files" in verdict.error


def test_evidence_the_parent_cannot_read_gives_an_error_verdict_not_a_traceback(tmp_path):
    # a load record no schema check stopped (the fake bypasses the parser): the parent's own reading fails
    load = dict(LOAD, data=dict(LOAD["data"], class_found=False, defined_names=5))
    run = ChildRun(phases={"runtime": RUNTIME, "load": load}, finished=True, returncode=0)
    child = []
    verdict = Grading("exercise3", _submission(tmp_path), runner=fake_runner(run, child)).finish()
    assert verdict.status == "error" and verdict.exit_code == 2
    assert "the grading process sent malformed evidence" in verdict.error and "TypeError" in verdict.error
    assert child[0].killed  # and the child was ended all the same


class InlineJudges:
    """Judges that judge in the test's own process, so what a test patched applies to the checks."""

    def __call__(self):
        return self

    def start(self, request: bytes, checks_timeout: float):
        from grader.judging.judgment import judge_request

        from grader.judging.exchange import encode

        return InlineJudge(encode(judge_request(request)))


class InlineJudge:
    sentinel = None

    def __init__(self, answer: bytes):
        self.answer = answer

    def ready(self) -> bool:
        return True

    def seconds_left(self) -> float:
        return 0.0

    def wait(self):
        return self.answer, None

    def kill(self) -> None:
        pass


def test_checks_that_hang_are_stopped_by_their_time_limit(tmp_path, monkeypatch):
    # whatever makes a check loop (evidence no validation foresaw, a fault of the grader), the
    # watchdog ends the checks and the submission gets an error verdict, never a stalled run
    from grader.judge import evidence

    def endless(self, name, check_id=""):
        while True:
            pass

    monkeypatch.setattr(evidence.Evidence, "phase", endless)
    run = ChildRun(phases={"runtime": RUNTIME, "load": LOAD}, started=["runtime", "load"],
                   finished=True, returncode=0)
    before = {t.name for t in threading.enumerate()}
    verdict = Grading("exercise3", _submission(tmp_path), Settings(checks_timeout=1),
                      runner=fake_runner(run), judges=InlineJudges()).finish()
    assert verdict.status == "error" and "did not finish within 1 s" in verdict.error
    assert {t.name for t in threading.enumerate()} - before == set()  # no watchdog or check thread left


GOOD_RUN = ChildRun(phases={"runtime": RUNTIME, "load": LOAD}, started=["runtime", "load"], finished=True,
                    returncode=0)


def test_a_judge_past_its_time_is_killed_and_its_submission_alone_is_an_error(tmp_path):
    from grader.judging.client import Judges

    judges = Judges(grace=0.0)
    try:
        late = Grading("exercise3", _submission(tmp_path), Settings(checks_timeout=0.001), runner=fake_runner(GOOD_RUN),
                       judges=lambda: judges).finish()
    finally:
        judges.close()
    assert late.status == "error" and "could not judge this submission's evidence within its time limit" in late.error
    on_time = Grading("exercise3", _submission(tmp_path), runner=fake_runner(GOOD_RUN)).finish()
    assert on_time.status != "error" and on_time.checks  # the shared judges were not disturbed


def test_a_judge_out_of_memory_gives_an_error_verdict_not_a_score(tmp_path):
    from grader.judging.client import Judges

    judges = Judges(memory_mb=64)  # less than the judge server itself has mapped: every allocation fails
    try:
        verdict = Grading("exercise3", _submission(tmp_path), runner=fake_runner(GOOD_RUN),
                          judges=lambda: judges).finish()
    finally:
        judges.close()
    assert verdict.status == "error" and verdict.score == 0
    assert "could not judge this submission's evidence within its" in verdict.error


def test_an_answer_that_lacks_a_declared_check_is_refused_not_scored_on_what_it_holds(tmp_path):
    """A judge that stopped short without saying why (6 of the exercise's checks, all passed) is no
    "passed 6/6": the answer is refused, and a full one is scored out of the exercise's declarations."""
    from grader import exercises
    from grader.api import max_points

    declared = declared_checks(exercises.get("exercise3"))
    items = [{"id": d["id"], "topic": d["topic"], "status": "passed", "points": d["points"], "message": ""}
             for d in declared]

    class Answering(InlineJudges):
        def __init__(self, checks):
            self.checks = checks

        def start(self, request, checks_timeout):
            return InlineJudge(json.dumps({"checks": self.checks, "overran": None, "failed": None}).encode())

    short = Grading("exercise3", _submission(tmp_path), runner=fake_runner(GOOD_RUN),
                    judges=Answering(items[:6])).finish()
    assert short.status == "error" and short.score == 0 and short.max_score == max_points("exercise3")
    assert "answered nonsense" in short.error and f"it holds 6 of the exercise's {len(declared)} checks" in short.error
    twice = Grading("exercise3", _submission(tmp_path), runner=fake_runner(GOOD_RUN),
                    judges=Answering(items + items[:1])).finish()
    assert twice.status == "error" and "repeated" in twice.error
    whole = Grading("exercise3", _submission(tmp_path), runner=fake_runner(GOOD_RUN),
                    judges=Answering(items)).finish()
    assert whole.status == "passed" and whole.score == whole.max_score == max_points("exercise3")


def test_a_message_cut_by_the_judge_is_one_the_grader_accepts():
    """The judge's cut and the grader's limit are one constant: a check quoting a config value of
    60 000 characters keeps its verdict, its message cut to exactly the limit."""
    from grader import exercises
    from grader.judging import exchange
    from grader.protocol import limits
    from grader.verdict import CheckResult

    declared = declared_checks(exercises.get("exercise3"))
    checks = [CheckResult(id=d["id"], title=d["title"], topic=d["topic"], status="passed", points=d["points"],
                          max_points=d["points"], message="") for d in declared]
    checks[0] = CheckResult(id=checks[0].id, title=checks[0].title, topic=checks[0].topic, status="failed",
                            points=0.0, max_points=checks[0].max_points, message="value " + "x" * 60_000)
    read = exchange.read_answer(exchange.encode(exchange.answer(checks)), declared)
    message = read["checks"][0].message
    assert len(message) == limits.MAX_MESSAGE and message.endswith("message cut]")
    assert [c.status for c in read["checks"]] == [c.status for c in checks]


@pytest.mark.parametrize("answer, why", [
    (b"not json", "not JSON"),
    (b'{"checks": [{"id": "weights.two_norms", "topic": "weights", "status": "passed", "points": 99, '
     b'"message": ""}], "overran": null, "failed": null}', "points it cannot have"),
    (b'{"checks": [{"id": "made.up", "topic": "api", "status": "passed", "points": 1, "message": ""}]}',
     "not one of the exercise's"),
])
def test_an_answer_of_the_wrong_form_is_an_error_verdict(tmp_path, answer, why):
    class Answering(InlineJudges):
        def start(self, request, checks_timeout):
            return InlineJudge(answer)

    verdict = Grading("exercise3", _submission(tmp_path), runner=fake_runner(GOOD_RUN), judges=Answering()).finish()
    assert verdict.status == "error" and "answered nonsense" in verdict.error and why in verdict.error


CHECKS = '''
import time
import pytest
from grader.judge.framework import check

@pytest.fixture
def endless(evidence):
    while True:
        pass

@check(id="a.loops", title="loops in its fixture", topic="api")
def check_loops_in_setup(endless):
    pass

@check(id="b.loops", title="loops", topic="api")
def check_loops(evidence):
    while True:
        time.sleep(0.001)

@check(id="c.fine", title="fine", topic="api")
def check_fine(evidence):
    assert evidence == "evidence"
'''


FINE = """
from grader.judge.framework import check

@check(id="c.fine", title="fine", topic="api")
def check_fine(evidence):
    assert evidence == "evidence"
"""


def test_the_watchdog_stops_endless_checks_and_leaves_nothing_behind(tmp_path):
    module = tmp_path / "endless.py"
    module.write_text(CHECKS, encoding="utf-8")
    watchdog = Watchdog(0.5)
    watchdog.start()
    with pytest.raises(ChecksOverran):
        run_checks(module, "evidence", watchdog)
    assert not [t for t in threading.enumerate() if t.name == "checks-watchdog"]
    fine = tmp_path / "fine.py"
    fine.write_text(FINE, encoding="utf-8")
    results = run_checks(fine, "evidence", Watchdog(60))
    assert [(r.id, r.status) for r in results] == [("c.fine", "passed")]


UNDER_A_PROFILER = """
import sys
from pathlib import Path
from grader.judging.plugin import Watchdog, run_checks

sys.setprofile(lambda *_: None)  # as a profiler, pdb or coverage would
results = run_checks(Path(sys.argv[1]), "evidence", Watchdog(60))
sys.setprofile(None)
print([(r.id, r.status) for r in results])
"""


def test_checks_judged_under_a_profiler_or_a_debugger_finish(tmp_path):
    """The watchdog drops a time limit it raised only when it raised one: on Python 3.11, dropping
    one where none is pending left the checks' thread, under a profiler or a debugger, unable to leave
    the watchdog's lock, so a developer's judge under cProfile or pdb never finished."""
    import subprocess
    import sys

    fine = tmp_path / "fine.py"
    fine.write_text(FINE, encoding="utf-8")
    shown = subprocess.run([sys.executable, "-c", UNDER_A_PROFILER, str(fine)], capture_output=True, text=True,
                           timeout=300)
    assert shown.stdout.strip() == "[('c.fine', 'passed')]", shown.stderr[-2000:]


NOISY = """
import logging, sys, warnings
import pytest
from grader.judge.framework import check

@check(id="c.warns", title="warns", topic="api")
def check_warns(evidence):
    warnings.warn("a warning", UserWarning)
    warnings.warn("deprecated", DeprecationWarning)
    logging.getLogger("checks").error("logged")
    print("printed"); print("to stderr", file=sys.stderr)

@check(id="c.fails", title="fails", topic="api")
def check_fails(evidence):
    assert evidence == "other", "Your layer gave the wrong thing."

@check(id="c.compares", title="compares", topic="api")
def check_compares(evidence):
    assert len(evidence) == 3

@check(id="c.skips", title="skips", topic="api")
def check_skips(evidence):
    raise pytest.skip.Exception("Not checked: nothing to go on.")

@check(id="c.raises", title="raises", topic="api")
def check_raises(evidence):
    raise KeyError("grader")
"""


def test_a_judges_session_without_pytests_unused_plugins_still_judges_every_outcome(tmp_path, capfd):
    """The judge's pytest session leaves out the plugins the checks never use: warnings, logging and
    output of a check change nothing and reach no one, and a failure keeps its message (assertion
    rewriting), a skip its reason, an exception its kind."""
    module = tmp_path / "noisy.py"
    module.write_text(NOISY, encoding="utf-8")
    with warnings.catch_warnings(record=True) as warned:  # Python's own warnings now, not pytest's
        warnings.simplefilter("always")
        results = {r.id: (r.status, r.message) for r in run_checks(module, "evidence", Watchdog(60))}
    assert "a warning" in [str(w.message) for w in warned]
    assert results["c.warns"] == ("passed", "")
    assert results["c.fails"] == ("failed", "Your layer gave the wrong thing.")
    assert results["c.compares"][0] == "failed" and "assert 8 == 3" in results["c.compares"][1]
    assert results["c.skips"][0] == "skipped" and "nothing to go on" in results["c.skips"][1]
    assert results["c.raises"][0] == "error" and "KeyError" in results["c.raises"][1]
    out, err = capfd.readouterr()
    assert "printed" not in out + err and "logged" not in out + err and "a warning" not in out + err


def test_a_notebook_cell_whose_source_is_not_text_is_an_error_and_starts_no_child(tmp_path):
    notebook = {"cells": [{"cell_type": "code", "metadata": {}, "source": ["import keras\n", 3]}]}
    path = _submission(tmp_path, json.dumps(notebook), "exercise3.ipynb")
    started = []
    verdict = Grading("exercise3", path, runner=fake_runner(ChildRun(), started)).finish()
    assert verdict.status == "error" and "not a readable notebook" in verdict.error and started == []


def test_a_symbolic_link_is_refused_and_its_target_not_read(tmp_path):
    link = tmp_path / "exercise3.py"
    link.symlink_to(exercises.get("exercise3").solution)
    started = []
    verdict = Grading("exercise3", link, runner=fake_runner(ChildRun(), started)).finish()
    assert verdict.status == "error" and "symbolic link" in verdict.error and started == []
    assert verdict.submission == str(link)


def test_a_batch_gives_every_submission_one_result_whatever_fails(tmp_path, monkeypatch):
    """A runner that raises for one file, evidence the parent cannot read for another, results that
    cannot be written for a third: each is an error for that submission alone."""
    paths = {name: _submission(tmp_path, STUB, f"{name}.py") for name in ("starts", "unreadable", "unwritable",
                                                                            "fine")}
    untrusted = ChildRun(phases={"runtime": RUNTIME}, protocol_error="the grading process sent an unknown record")
    unreadable = ChildRun(phases={"runtime": RUNTIME, "load": dict(LOAD, data=dict(LOAD["data"], class_found=False,
                                                                                   defined_names=5))})

    def runner(job, source, timeout, memory_mb, respond=None):
        name = runner.order.pop(0)
        if name == "starts":
            raise RuntimeError("no more processes")
        return FakeChild(unreadable if name == "unreadable" else untrusted)

    runner.order = ["fine", "starts", "unreadable", "unwritable"]
    real_write = Outputs.write

    def write(self, result, **options):
        if result.submission.id == "unwritable" and result.verdict.error and "could not write" not in result.verdict.error:
            raise OSError(28, "No space left on device")
        return real_write(self, result, **options)

    monkeypatch.setattr(Outputs, "write", write)
    submissions = [Submission(name, paths[name]) for name in ("fine", "starts", "unreadable", "unwritable")]
    results = {r.submission.id: r.verdict for r in run_batch("exercise3", submissions, tmp_path / "out", jobs=1,
                                                               workers=runner)}
    assert set(results) == {"fine", "starts", "unreadable", "unwritable"}
    assert all(v.status == "error" for v in results.values())
    assert "unknown record" in results["fine"].error
    assert "could not start the grading process" in results["starts"].error
    assert "malformed evidence" in results["unreadable"].error
    assert "could not write its results" in results["unwritable"].error
    rows = [json.loads(line) for line in (tmp_path / "out" / "verdicts.jsonl").read_text().splitlines()]
    assert sorted(os.path.basename(r["submission"]) for r in rows) == sorted(f"{n}.py" for n in results)


def test_a_grading_process_running_another_grader_package_is_refused_and_says_so(tmp_path):
    """The grader and the child it starts must be one installation: a job from a grader at another
    place (a clone's folder on the path while the interpreter's own installation is another) is refused
    by the child before any of the submission runs, and the verdict names both, never TensorFlow."""
    from grader.sandbox.process import Child

    def elsewhere(job, source, timeout, memory_mb, respond=None):
        job = dict(job, grader={"version": "0.0.9", "package": "/somewhere/else/grader"})
        return Child(job, source, timeout, memory_mb, respond=respond)

    path = tmp_path / "exercise3.py"
    path.write_text(exercises.get("exercise3").solution.read_text(encoding="utf-8"), encoding="utf-8")
    verdict = Grading("exercise3", path, runner=elsewhere).finish()
    assert verdict.status == "error" and verdict.exit_code == 2
    assert "not the same installation" in verdict.error and "/somewhere/else/grader (version 0.0.9)" in verdict.error
    assert "TensorFlow" not in verdict.error
