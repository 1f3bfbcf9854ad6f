"""Hostile submissions never pass, never stop the grader and touch nothing outside their scratch folder.

Each one ends as a failed or an error verdict, in bounded time, with a message
that says what happened.
"""

from __future__ import annotations

import hashlib
import os
import tempfile

import pytest

from grader import exercises
from grader.api import Settings, grade

from .conftest import grade_sources

SOLUTION = exercises.get("exercise3").solution.read_text(encoding="utf-8")
STUB = exercises.get("exercise3").stub.read_text(encoding="utf-8")
ROOT = exercises.PROJECT_ROOT

FORGED = (
    "import json, sys\n"
    "verdict = {'exercise': 'exercise3', 'status': 'passed', 'score': 23, 'max_score': 23, 'checks': []}\n"
    "print(json.dumps(verdict)); print('PASSED'); print('23 passed, 0 failed')\n"
    "print(json.dumps(verdict), file=sys.stderr)\n"
)


def _in_init(code: str) -> str:
    return SOLUTION.replace("        super().__init__(**kwargs)\n", f"        super().__init__(**kwargs)\n        {code}\n")


def _in_call(code: str) -> str:
    return SOLUTION.replace("        if mask is not None:\n            mask = keras.ops.expand_dims",
                            f"        {code}\n        if mask is not None:\n            mask = keras.ops.expand_dims")


# name -> (source, statuses allowed for the verdict, phrase the verdict must contain)
HOSTILE = {
    "sys_exit_at_import": (STUB + "\nimport sys\nsys.exit(0)\n", {"error"}, "SystemExit"),
    "os_exit_at_import": (STUB + "\nimport os\nos._exit(0)\n", {"error"}, "stopped unexpectedly (exit code 0)"),
    "raise_system_exit_at_import": (STUB + "\nraise SystemExit(0)\n", {"error"}, "SystemExit"),
    "keyboard_interrupt_at_import": (STUB + "\nraise KeyboardInterrupt\n", {"error"}, "KeyboardInterrupt"),
    "sys_exit_in_init": (_in_init("import sys; sys.exit(0)"), {"failed"}, "SystemExit"),
    "os_exit_in_init": (_in_init("import os; os._exit(0)"), {"failed"}, "stopped unexpectedly"),
    "keyboard_interrupt_in_init": (_in_init("raise KeyboardInterrupt"), {"failed"}, "KeyboardInterrupt"),
    "sys_exit_in_call": (_in_call("import sys; sys.exit(0)"), {"failed"}, "SystemExit"),
    "os_exit_in_call": (_in_call("import os; os._exit(0)"), {"failed"}, "stopped unexpectedly"),
    "keyboard_interrupt_in_call": (_in_call("raise KeyboardInterrupt"), {"failed"}, "KeyboardInterrupt"),
    "atexit_forges_a_verdict": (
        STUB + "\nimport atexit\natexit.register(lambda: print('{\"status\": \"passed\"}'))\n", {"failed"},
        "NotImplementedError",
    ),
    "prints_forged_verdicts": (FORGED + STUB, {"failed"}, "NotImplementedError"),
    "patches_test_helpers": (
        "import numpy.testing, unittest, pytest\n"
        "numpy.testing.assert_allclose = lambda *a, **k: None\n"
        "unittest.TestCase.assertEqual = lambda *a, **k: None\n"
        "pytest.fail = lambda *a, **k: None\n"
        "import grader.judge.framework as framework\nframework.fail = lambda *a, **k: None\n" + STUB,
        {"error"}, "Permission denied",  # the checks are not even readable from a grading
    ),
    "patches_the_probe_and_stream": (
        "import grader.exercises.exercise3.probe as probe\n"
        "from grader.probe.evidence_stream import EvidenceStream\n"
        "def forged(self, record):\n"
        "    if record.get('event') == 'end':\n"
        "        record.update(ok=True, error=None)\n"
        "    return original(self, record)\n"
        "original = EvidenceStream.emit\nEvidenceStream.emit = forged\n"
        "probe.run = lambda *a, **k: None\n" + STUB,
        {"failed", "error"}, "",
    ),
    "lying_output_object": (
        SOLUTION.replace("        return self.layernorm_2(proj_input + proj_output)\n",
                         "        class Liar:\n"
                         "            shape = inputs.shape\n"
                         "            def __eq__(self, other): return True\n"
                         "            def __sub__(self, other): return 0\n"
                         "            def __array__(self, *a, **k): raise TypeError('no numbers here')\n"
                         "        return Liar()\n"),
        {"failed"}, "not a tensor",
    ),
    "writes_files_everywhere": (
        "import os, pathlib\n"
        "for target in [pathlib.Path.cwd() / 'verdict.json', pathlib.Path('/tmp/verdict.json'),\n"
        f"               pathlib.Path({str(ROOT)!r}) / 'exercises' / 'exercise3.py']:\n"
        "    try:\n"
        "        target.write_text('{\"status\": \"passed\"}')\n"
        "    except OSError:\n"
        "        pass\n" + STUB,
        {"failed"}, "NotImplementedError",
    ),
    "reads_the_solution": (
        f"SOURCE = open({str(ROOT / 'solutions' / 'exercise3.py')!r}).read()\nexec(SOURCE)\n",
        {"error"}, "PermissionError",
    ),
    "signals_the_grader": (
        "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n" + SOLUTION, {"error"}, "PermissionError",
    ),
    "memory_hog_at_import": (
        "import numpy as np\nHOG = np.ones((2048, 1024, 1024))\n" + SOLUTION, {"error"}, "MemoryError",
    ),
    "memory_hog_in_call": (
        _in_call("import numpy as np; np.ones((2048, 1024, 1024))"), {"failed"}, "memory limit",
    ),
    "output_flood": (
        "import sys\nfor _ in range(20000):\n    print('x' * 1000)\n    print('y' * 1000, file=sys.stderr)\n" + STUB,
        {"failed"}, "NotImplementedError",
    ),
}


def _landlock_available() -> bool:
    from grader.sandbox.landlock import abi_version

    return abi_version() >= 6


NEEDS_LANDLOCK = {"reads_the_solution", "signals_the_grader", "writes_files_everywhere", "patches_test_helpers"}


# One of each kind (exits, forgery, patching, files, signals, memory, output) through a fresh grading
# process, as `grade` runs it; the rest through the batch's warm worker, which gives the same verdicts
# (tests/test_batch.py, and test_every_hostile_file_gets_the_same_verdict_through_a_fresh_grade).
THROUGH_GRADE = ("os_exit_at_import", "prints_forged_verdicts", "patches_test_helpers", "reads_the_solution",
                 "signals_the_grader", "memory_hog_in_call", "output_flood")


def _outcome(verdict) -> tuple:
    return verdict.status, verdict.score, [(c.id, c.status) for c in verdict.checks]


@pytest.fixture(scope="module")
def hostile_verdicts(tmp_path_factory):
    stub_hash = hashlib.sha256(exercises.get("exercise3").stub.read_bytes()).hexdigest()
    folder = tmp_path_factory.mktemp("hostile")
    fresh = grade_sources("exercise3", {k: HOSTILE[k][0] for k in THROUGH_GRADE}, folder / "fresh")
    warm = grade_sources("exercise3", {k: v[0] for k, v in HOSTILE.items()}, folder / "warm", warm=True)
    verdicts = dict(warm, **fresh)
    verdicts["_stub_unchanged"] = hashlib.sha256(exercises.get("exercise3").stub.read_bytes()).hexdigest() == stub_hash
    verdicts["_warm"] = warm
    return verdicts


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_submission_never_passes(hostile_verdicts, name):
    if name in NEEDS_LANDLOCK and not _landlock_available():
        pytest.skip("this kernel has no Landlock ABI 6: the child runs under time and memory limits only")
    _, allowed, says = HOSTILE[name]
    verdict = hostile_verdicts[name]
    assert verdict.status in allowed, (verdict.status, verdict.error)
    assert verdict.exit_code in (1, 2)
    assert verdict.score < verdict.max_score
    text = (verdict.error or "") + "\n".join(c.message for c in verdict.checks)
    assert says in text
    assert len(verdict.context.get("output", "")) <= 2200


def test_the_grader_survived(hostile_verdicts):
    # every hostile submission above was graded in one run of this process, two at a time
    assert set(hostile_verdicts) == set(HOSTILE) | {"_stub_unchanged", "_warm"}
    assert hostile_verdicts["_stub_unchanged"]
    assert not (ROOT / "verdict.json").exists()


@pytest.mark.slow
def test_every_hostile_file_gets_the_same_verdict_through_a_fresh_grade_and_the_warm_worker(hostile_verdicts,
                                                                                            tmp_path):
    fresh = grade_sources("exercise3", {k: v[0] for k, v in HOSTILE.items() if k not in THROUGH_GRADE}, tmp_path)
    fresh.update({k: hostile_verdicts[k] for k in THROUGH_GRADE})
    for name in HOSTILE:
        assert _outcome(fresh[name]) == _outcome(hostile_verdicts["_warm"][name]), name


def test_output_flood_is_capped_in_the_report(hostile_verdicts):
    output = hostile_verdicts["output_flood"].context["output"]
    assert output.startswith("x" * 200) and "lines in all" in output


SLOW = {
    "sleep_in_init": (_in_init("import time; time.sleep(600)"), "time limit ran out while being constructed"),
    "endless_loop_in_call": (_in_call("while True: pass"), "time limit ran out"),
    "endless_output_at_import": ("while True:\n    print('PASSED ' * 100)\n" + SOLUTION, "time limit"),
}


def test_endless_code_is_stopped_at_the_time_limit(tmp_path):
    # through fresh grading processes: their clock starts once TensorFlow is imported and the process is
    # confined, so a short limit is the same on a busy machine; the code under test never ends
    verdicts = grade_sources("exercise3", {k: v[0] for k, v in SLOW.items()}, tmp_path, Settings(timeout=5))
    for name, (_, says) in SLOW.items():
        verdict = verdicts[name]
        assert verdict.status in ("failed", "error"), name
        text = (verdict.error or "") + "\n".join(c.message for c in verdict.checks)
        assert says in text, (name, text[:500])
    statuses = {c.status for c in verdicts["sleep_in_init"].checks}
    assert "timeout" in statuses and "passed" not in statuses


def test_a_planted_conftest_changes_nothing(tmp_path):
    (tmp_path / "conftest.py").write_text(
        "import pytest\n"
        "@pytest.hookimpl(hookwrapper=True)\n"
        "def pytest_runtest_makereport(item, call):\n"
        "    outcome = yield\n"
        "    outcome.get_result().outcome = 'passed'\n",
        encoding="utf-8",
    )
    (tmp_path / "pytest.ini").write_text("[pytest]\naddopts = -p no:terminal\n", encoding="utf-8")
    submission = tmp_path / "exercise3.py"
    submission.write_text(STUB, encoding="utf-8")
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        verdict = grade("exercise3", submission)
    finally:
        os.chdir(cwd)
    assert verdict.status == "failed" and verdict.score == 0


def test_scratch_folders_are_removed_and_the_file_is_untouched(tmp_path, monkeypatch):
    scratch_root = tmp_path / "tmp"
    scratch_root.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch_root))
    submission = tmp_path / "exercise3.py"
    submission.write_text(SOLUTION + "\nopen(__file__, 'w').write('overwritten')\n", encoding="utf-8")
    before = submission.read_bytes()
    verdict = grade("exercise3", submission)
    assert verdict.status == "passed"
    assert submission.read_bytes() == before
    assert list(scratch_root.iterdir()) == []


def test_ten_gradings_give_ten_identical_verdicts(tmp_path):
    from .catalog.exercise3 import MISTAKES

    sources = {f"copy{i}": MISTAKES[0].source for i in range(10)}
    verdicts = grade_sources("exercise3", sources, tmp_path, warm=True)
    checks = {name: [(c.id, c.status, c.points, c.message) for c in v.checks] for name, v in verdicts.items()}
    assert len({repr(c) for c in checks.values()}) == 1
    assert verdicts["copy0"].status == "failed"
