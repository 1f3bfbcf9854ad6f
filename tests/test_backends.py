"""Grading on JAX and PyTorch: the same verdicts as on TensorFlow, one message for a layer that calls
TensorFlow itself, and --all-backends telling where a layer behaves otherwise on another backend."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from grader import backends, exercises
from grader.api import Settings, grade_pairs

from .catalog import catalog
from .conftest import WARM_JOBS

OTHER_BACKENDS = [pytest.param(name, marks=pytest.mark.skipif(
    not backends.installed(name), reason=f"the {backends.title(name)} backend is not installed here "
                                         f"(pip install '.[{name}]')")) for name in ("jax", "torch")]
# JAX compiles what the solution's run did not (grader.compiled) in each grading process (about 10 s a
# grading on two idle cores, minutes on busy ones): the tests give a grading ample time, so that only a wrong
# verdict fails them
SLOW_BACKEND_TIMEOUT = 900.0
# The whole catalogue on another backend is about 10 s a grading, a quarter of an hour on two cores: by default
# each exercise's solution and correct variants are graded there (what must stay correct everywhere),
# and every mistake too with GRADE_BACKEND_CATALOG=all.
EVERY_ENTRY = os.environ.get("GRADE_BACKEND_CATALOG") == "all"
needs_jax = pytest.mark.skipif(not backends.installed("jax"), reason="JAX is not installed here (pip install '.[jax]')")

# a call of a TensorFlow function (tf.newaxis is None, tf.keras is Keras: both run everywhere)
TF_CALL = re.compile(r"\btf\.(?!newaxis\b|keras\b)[A-Za-z_][\w.]*\s*\(")


def calls_tensorflow(source: str) -> bool:
    return "import tensorflow" in source and bool(TF_CALL.search(source))


# Correct layers that behave otherwise on a backend, because the backend does: (exercise, submission,
# backend) -> (the check that fails there, what its message says). These are the findings --all-backends
# exists for, not grader faults.
# Correct layers the grader cannot yet follow on a backend: a custom layer's tensor operators
# (``inputs * mask``) are recorded on TensorFlow only, so on JAX its computation stays unverified and
# the checks that need it are not checked (never an error).
NOT_FOLLOWED: set = set()
KNOWN_DIFFERENCES = {
    # positions = arange(0, sequence_length)[:length] on keras.Input(shape=(None,)): JAX's symbolic shapes
    # cannot tell that min(sequence_length, length) is length, so the sum does not broadcast
    ("exercise1", "variant_positions_sliced_from_a_full_range", "jax"):
        ("mask.functional", "Incompatible shapes for broadcasting"),
}


def outcome(verdict) -> tuple:
    """What must be the same on every backend: the status, the score and each check's status."""
    return verdict.status, verdict.score, tuple((c.id, c.status) for c in verdict.checks)


def golden_verdicts() -> dict:
    """{(exercise, name): verdict} of the catalogue on TensorFlow, read from tests/golden/<exercise>.json
    (status, score, each check's id, status and message), for what ``outcome`` compares."""
    from types import SimpleNamespace

    from .test_golden_verdicts import golden_file

    return {(exercise_id, name): SimpleNamespace(
        status=entry["status"], score=entry["score"],
        checks=[SimpleNamespace(id=check, status=status, message=message)
                for check, status, _, message in entry["checks"]])
        for exercise_id in exercises.EXERCISES
        for name, entry in json.loads(golden_file(exercise_id).read_text(encoding="utf-8")).items()}


# ----------------------------------------------------------------------------- one CPU a JAX grading
def test_a_jax_grading_takes_the_idlest_cpu_and_draws_among_equals():
    from grader.probe.runtime import idlest

    samples = iter([{0: 100, 1: 100, 2: 100}, {0: 101, 1: 110, 2: 102}])  # cpu 1 idle 10 ticks, the others busy
    assert idlest([0, 1, 2], 0, read=lambda: next(samples)) == 1
    assert idlest([0, 2], 0, read=iter([{0: 0, 1: 0, 2: 0}, {0: 1, 1: 9, 2: 5}]).__next__) == 2  # only the allowed
    drawn = {idlest([0, 1], 0, read=iter([{0: 0, 1: 0}, {0: 10, 1: 9}]).__next__) for _ in range(64)}
    assert drawn == {0, 1}  # within a clock tick is a tie: drawn, so that gradings started together may spread
    assert idlest([3, 5], 0, read=dict) in {3, 5}  # no counters: drawn among all


@needs_jax
def test_a_worker_that_preloaded_jax_leaves_its_childrens_cpus_to_them():
    """The worker a batch forks JAX gradings from keeps every CPU it may use: each grading chooses its own
    (pinned in the worker, all its gradings would share one CPU)."""
    shown = subprocess.run(
        [sys.executable, "-c", "import os, grader.child.preload; print(sorted(os.sched_getaffinity(0)))"],
        env={**os.environ, "KERAS_BACKEND": "jax"}, capture_output=True, text=True, check=True)
    assert json.loads(shown.stdout) == sorted(os.sched_getaffinity(0))


WHAT_IS_IMPORTED = """
import sys
from grader.probe import runtime
{start}
before = "jax" in sys.modules
import jax
print(before, type(jax.numpy.zeros(2)).__name__)
"""


@needs_jax
@pytest.mark.parametrize("start", ["import grader.child.preload",
                                   "runtime.select('tensorflow'); runtime.start_runtime('tensorflow')"])
def test_tensorflow_starts_without_importing_jax_and_a_submission_may_import_it_after(start):
    """TensorFlow's import would import JAX for TFLite's converter of JAX functions, which no grading
    runs: a TensorFlow worker (preload) and a cold grading process start without it, and JAX is there
    for a submission that imports it."""
    shown = subprocess.run([sys.executable, "-c", WHAT_IS_IMPORTED.format(start=start)],
                           env={**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"},
                           capture_output=True, text=True, check=True)
    assert shown.stdout.split()[-2:] == ["False", "ArrayImpl"], shown.stderr[-2000:]


COLLECTOR = """
import gc, sys

class Watch:  # notes, for each module of Keras and TensorFlow imported, whether the collector was on
    seen = []

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("keras", "tensorflow"):
            self.seen.append(gc.isenabled())

sys.meta_path.insert(0, Watch())
from grader.probe import runtime
{state}
{start}
print(len(Watch.seen) > 100, any(Watch.seen), gc.isenabled())
"""


@pytest.mark.parametrize("start", ["import grader.child.preload",
                                   "runtime.select('tensorflow'); runtime.import_libraries('tensorflow')"])
@pytest.mark.parametrize("state", ["", "gc.disable()"])
def test_a_start_imports_with_the_collector_off_and_leaves_it_as_it_was(start, state):
    """A worker (preload) and a grading process import Keras and TensorFlow with the garbage collector
    off (the imports make hundreds of thousands of objects and next to no garbage); the collector is
    then as the process had it: on, or still off where the process had turned it off."""
    shown = subprocess.run([sys.executable, "-c", COLLECTOR.format(state=state, start=start)],
                           env={**os.environ, "KERAS_BACKEND": "tensorflow", "TF_CPP_MIN_LOG_LEVEL": "3"},
                           capture_output=True, text=True, check=True)
    assert shown.stdout.split()[-3:] == ["True", "False", str(not state)], shown.stderr[-2000:]


def test_a_start_whose_import_fails_leaves_the_garbage_collector_on(monkeypatch):
    import gc

    from grader.probe import runtime

    monkeypatch.setitem(sys.modules, "keras", None)  # the import raises at once
    assert gc.isenabled()
    with pytest.raises(ImportError):
        runtime.import_libraries("tensorflow")
    assert gc.isenabled()


# ----------------------------------------------------------------------------- settings and naming
def test_backend_setting_from_flag_environment_and_default():
    assert backends.resolve(None, {}) == "tensorflow"
    assert backends.resolve("tensorflow", {"GRADE_BACKEND": "jax"}) == "tensorflow"  # the flag wins
    with pytest.raises(backends.BackendError, match="must be one of tensorflow, jax, torch, got 'numpy'"):
        backends.resolve("numpy", {})
    with pytest.raises(backends.BackendError, match="GRADE_BACKEND='mxnet'"):
        backends.resolve(None, {"GRADE_BACKEND": "mxnet"})


def test_a_backend_that_is_not_installed_names_its_extra(monkeypatch):
    from grader.extras import install_line

    monkeypatch.setattr(backends, "installed", lambda name: name == "tensorflow")
    with pytest.raises(backends.BackendError) as refused:
        backends.resolve("torch", {})
    assert str(refused.value) == ("--backend asks for the PyTorch backend, which is not installed here "
                                  f"({install_line('torch')})")
    with pytest.raises(backends.BackendError) as refused:
        backends.resolve(None, {"GRADE_BACKEND": "jax"})
    assert "GRADE_BACKEND='jax'" in str(refused.value) and install_line("jax") in str(refused.value)


def test_grade_refuses_an_unknown_backend_with_where_it_came_from(tmp_path):
    env = dict(os.environ, GRADE_BACKEND="theano")
    result = subprocess.run([sys.executable, "-m", "grader", "exercise3", "--submission",
                             str(exercises.get("exercise3").solution)], capture_output=True, text=True, env=env)
    assert result.returncode == 2
    assert "environment variable GRADE_BACKEND='theano': must be one of tensorflow, jax, torch" in result.stderr


SOURCE = """import tensorflow as tf
from tensorflow import math as tfm
from tensorflow.math import not_equal
import keras


class Layer(keras.layers.Layer):
    def call(self, x):
        a = tf.math.not_equal(x, 0)
        b = tfm.reduce_sum(
            x)
        c = not_equal(x, 1)
        d = tf.keras.ops.sum(x)
        return tf.cast(a, "float32")
"""


def test_the_tensorflow_call_is_named_from_the_source():
    assert backends.called_name(SOURCE, 9) == "tf.math.not_equal"
    assert backends.called_name(SOURCE, 10) == "tf.math.reduce_sum"
    assert backends.called_name(SOURCE, 11) == "tf.math.reduce_sum"  # inside a call spread over two lines
    assert backends.called_name(SOURCE, 12) == "tf.math.not_equal"
    assert backends.called_name(SOURCE, 13) is None  # tf.keras is Keras, on every backend
    assert backends.keras_ops_for("tf.math.reduce_sum") == "keras.ops.sum"
    assert backends.keras_ops_for("tf.cast") == "keras.ops.cast"
    assert backends.keras_ops_for("tf.py_function") is None


def test_the_message_names_the_first_call_its_line_and_what_runs_everywhere():
    message = backends.direct_call_message(SOURCE, [9, 14], "jax")
    assert message == ("your layer calls TensorFlow directly (tf.math.not_equal at line 9, and 1 other line): it "
                       "runs only on the TensorFlow backend, not on JAX; keras.ops.not_equal runs on all three")
    # lines from the grading process are only looked up in the grader's copy of the source
    assert "somewhere" in backends.direct_call_message(SOURCE, [10_000, -1, True], "torch")
    cell = backends.direct_call_message(SOURCE, [9], "jax", where=lambda line: f"code cell 2, line {line - 4}")
    assert "tf.math.not_equal at code cell 2, line 5" in cell


def test_the_hook_that_finds_tensorflow_calls_watches_only_a_submission_that_names_tensorflow(tmp_path):
    """Off another backend, every grading process has TensorFlow imported (Keras's seeding imports it):
    the profile hook, which costs every call the layer makes, watches only where the submission's own
    code names TensorFlow, in its text or through a name it was handed."""
    import math
    import types

    from grader.probe.direct_calls import names_tensorflow

    def module_with(**names):
        module = types.ModuleType("submission")
        module.__dict__.update(names)
        return module

    class Tricky:
        @property
        def __module__(self):
            raise RuntimeError("no")

    written = {"plain": "import keras\nclass Layer(keras.layers.Layer):\n    pass\n", "tensorflow": SOURCE,
               "keras2": "from tensorflow import keras\n", "lazy": "def f():\n    import tensorflow\n"}
    paths = {}
    for name, text in written.items():
        paths[name] = tmp_path / f"{name}.py"
        paths[name].write_text(text, encoding="utf-8")
    assert not names_tensorflow(str(paths["plain"]),
                                module_with(keras=types.ModuleType("keras"), math=math, x=Tricky()))
    assert all(names_tensorflow(str(paths[name])) for name in ("tensorflow", "keras2", "lazy"))
    # written out nowhere: a module or a function of TensorFlow's among its names (handed on by a helper)
    tensorflow = types.ModuleType("tensorflow")
    handed = types.FunctionType((lambda: None).__code__, {})
    handed.__module__ = "tensorflow.python.ops.math_ops"
    assert names_tensorflow(str(paths["plain"]), module_with(tf=tensorflow))
    assert names_tensorflow(str(paths["plain"]), module_with(reduce_sum=handed))
    assert names_tensorflow(str(tmp_path / "gone.py"))  # unreadable: watched


def test_the_keras_ops_list_matches_the_installed_keras():
    backend = "jax" if backends.installed("jax") else "tensorflow"
    listed = subprocess.run(
        [sys.executable, "-c", "import keras; print(' '.join(n for n in dir(keras.ops) if not n.startswith('_') "
                               "and callable(getattr(keras.ops, n))))"],
        capture_output=True, text=True, env=dict(os.environ, KERAS_BACKEND=backend), check=True).stdout.split()
    from grader.keras_ops import NAMES

    assert set(listed) == NAMES


def test_the_judge_and_the_comparison_import_no_backend():
    """The parent's replay, the checks, the judge and --all-backends' comparison are NumPy only: judging
    a JAX grading imports neither TensorFlow nor JAX."""
    modules = ["grader.judging.server", "grader.judging.judgment", "grader.portability", "grader.api", "grader.report",
               *[exercise.checks_module for exercise in exercises.EXERCISES.values()]]
    code = (f"import importlib, sys\nfor m in {modules!r}: importlib.import_module(m)\n"
            "print(sorted({n.split('.')[0] for n in sys.modules} & {'tensorflow', 'jax', 'torch', 'keras'}))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


# ----------------------------------------------------------------------------- the catalogue on each backend
@pytest.fixture(scope="session")
def backend_workers():
    """{backend: Workers}: one warm worker per backend for a test process's catalogues (each test
    process makes its own: tests/conftest.py's SHARED_BETWEEN_PROCESSES), started when first asked."""
    from grader.workers import Workers

    started: dict = {}

    def workers(backend: str) -> Workers:
        if backend not in started:
            started[backend] = Workers(backend=backend)
        return started[backend]

    yield workers
    for running in started.values():
        running.close()


def _grade_catalogue(exercise_id: str, backend: str, folder: Path, workers, seed: int = 11) -> tuple[dict, dict]:
    """({name: Verdict}, {name: source}) for an exercise's solution, mistakes and variants graded on
    ``backend``, forked from ``workers``, a warm worker that preloaded it (as grade batch grades a class)."""
    mistakes, variants = catalog(exercise_id)
    sources = {"solution": exercises.get(exercise_id).solution.read_text(encoding="utf-8")}
    if EVERY_ENTRY:
        sources.update({f"mistake_{m.name}": m.source for m in mistakes})
    sources.update({f"variant_{v.name}": v.source for v in variants})
    folder.mkdir(parents=True)
    names = {}
    for name, source in sources.items():
        path = folder / f"{name}.py"
        path.write_text(source, encoding="utf-8")
        names[path.resolve()] = name
    settings = Settings(seed=seed, backend=backend, timeout=SLOW_BACKEND_TIMEOUT)
    verdicts = {names[path]: verdict for _, path, verdict in grade_pairs(
        [(exercise_id, p) for p in names], settings, jobs=WARM_JOBS, runner=workers)}
    return verdicts, sources


@pytest.mark.slow
@pytest.mark.parametrize("backend", OTHER_BACKENDS)
@pytest.mark.parametrize("exercise_id", list(exercises.EXERCISES))
def test_every_catalogued_submission_gets_the_tensorflow_verdict_on_every_backend(exercise_id, backend, tmp_path,
                                                                                   backend_workers, request):
    """Same status, score and check results as on TensorFlow (the catalogue's verdicts as the repository
    keeps them, tests/golden/, which tests/test_golden_verdicts.py holds equal to every run's), with the catalogue's
    seed; a layer that calls TensorFlow itself instead gets the one message that says so (and what runs
    everywhere), never a traceback."""
    on_tensorflow = {name: verdict for (graded, name), verdict in golden_verdicts().items()
                     if graded == exercise_id and name != "stub"}
    verdicts, sources = _grade_catalogue(exercise_id, backend, tmp_path / backend, backend_workers(backend),
                                         request.config.catalog_seed)
    assert set(verdicts) <= set(on_tensorflow) and "solution" in verdicts
    differing = {}
    for name, verdict in verdicts.items():
        assert verdict.context.get("backend") == backend
        if calls_tensorflow(sources[name]):
            assert verdict.status == "error", name
            assert "your layer calls TensorFlow directly (tf." in verdict.error, (name, verdict.error)
            assert "Traceback" not in verdict.error
            continue
        if (exercise_id, name, backend) in NOT_FOLLOWED:
            assert verdict.status == "failed" and not any(c.status == "error" for c in verdict.checks), name
            continue
        known = KNOWN_DIFFERENCES.get((exercise_id, name, backend))
        if known is not None:
            failing = [c for c in verdict.checks if c.status != "passed"]
            assert on_tensorflow[name].status == "passed" and [c.id for c in failing] == [known[0]], name
            assert known[1] in failing[0].message
            continue
        if outcome(verdict) != outcome(on_tensorflow[name]):
            statuses = {c.id: c.status for c in on_tensorflow[name].checks}
            differing[name] = (verdict.status, verdict.error, [
                (c.id, statuses.get(c.id), c.status, c.message[:300]) for c in verdict.checks
                if statuses.get(c.id) != c.status])
    assert differing == {}
    assert verdicts["solution"].status == "passed"


# ----------------------------------------------------------------------------- one submission, in full
def _grade_json(*arguments: str) -> tuple[int, dict]:
    result = subprocess.run([sys.executable, "-m", "grader", *arguments, "--json", "--seed", "7", "--timeout",
                             str(SLOW_BACKEND_TIMEOUT)],
                            capture_output=True, text=True)
    assert result.stdout.strip(), result.stderr
    return result.returncode, json.loads(result.stdout)


@needs_jax
def test_a_tensorflow_call_under_jax_gets_one_clear_message(tmp_path):
    mistakes, _ = catalog("exercise1")
    source = next(m.source for m in mistakes if m.name == "tensorflow_op_in_compute_mask")
    path = tmp_path / "exercise1.py"
    path.write_text(source, encoding="utf-8")
    line = next(n for n, text in enumerate(source.splitlines(), 1) if "tf.math.not_equal(" in text)
    code, verdict = _grade_json("exercise1", "--submission", str(path), "--backend", "jax")
    assert code == 2 and verdict["status"] == "error" and verdict["backend"] == "jax"
    assert verdict["error"] == (
        f"The submission could not be graded on JAX: your layer calls TensorFlow directly (tf.math.not_equal at "
        f"line {line}): it runs only on the TensorFlow backend, not on JAX; keras.ops.not_equal runs on all three.")
    code, verdict = _grade_json("exercise1", "--submission", str(path))  # on TensorFlow: its real mistake
    assert verdict["backend"] == "tensorflow" and verdict["status"] == "failed"


# An encoder that masks only when the mask "is a real tensor" by TensorFlow's sign of one (.numpy): right on
# TensorFlow, where Keras hands it an EagerTensor; on JAX the mask is a jax.Array, and the padding is attended to.
TENSOR_CHECKED_MASK = ("        if mask is not None:\n            mask = keras.ops.expand_dims(mask, axis=1)\n",
                       "        if hasattr(mask, \"numpy\"):  # a tensor, not None\n"
                       "            mask = keras.ops.expand_dims(mask, axis=1)\n        else:\n            mask = None\n")


@pytest.mark.slow
@needs_jax
def test_all_backends_reports_where_mask_handling_differs(tmp_path):
    solution = exercises.get("exercise3").solution.read_text(encoding="utf-8")
    assert solution.count(TENSOR_CHECKED_MASK[0]) == 1
    path = tmp_path / "exercise3.py"
    path.write_text(solution.replace(*TENSOR_CHECKED_MASK), encoding="utf-8")
    code, result = _grade_json("exercise3", "--submission", str(path), "--all-backends")
    assert code == 0 and result["status"] == "passed" and result["backend"] == "tensorflow"  # TensorFlow's verdict
    by_backend = {b["backend"]: b for b in result["backends"]}
    assert by_backend["tensorflow"]["status"] == "passed" and by_backend["jax"]["status"] == "failed"
    assert result["portable"] is False
    (difference,) = [d for d in result["differences"] if d["backend"] == "jax"]
    assert difference["check"].startswith("mask.")
    assert difference["check_detail"] == "passed on TensorFlow, failed on JAX"
    assert difference["phase"] == "mask"
    assert "MultiHeadAttention" in difference["call"]  # where the mask should have arrived
    assert "mask" in difference["detail"]


@pytest.mark.slow
@needs_jax
def test_all_backends_finds_the_solution_the_same_everywhere(tmp_path):
    code, result = _grade_json("exercise3", "--submission", str(exercises.get("exercise3").solution),
                               "--all-backends")
    assert code == 0 and result["portable"] is True and result["differences"] == []
    assert {b["backend"] for b in result["backends"]} == set(backends.available())
    assert all(b["status"] == "passed" for b in result["backends"])


@pytest.mark.slow
@needs_jax
def test_the_report_says_which_backend_ran(tmp_path):
    result = subprocess.run([sys.executable, "-m", "grader", "exercise3", "--submission",
                             str(exercises.get("exercise3").solution), "--backend", "jax", "--seed", "7",
                             "--timeout", str(SLOW_BACKEND_TIMEOUT)],
                            capture_output=True, text=True, env=dict(os.environ, COLUMNS="80"))
    assert result.returncode == 0, result.stdout + result.stderr
    first = result.stdout.splitlines()[0]
    assert "Score 23/23" in first and "on JAX" in first and len(first) <= 80
    assert "sandboxed" in first  # the same confinement as on TensorFlow


# ----------------------------------------------------------------------------- confinement on each backend
PROBING = '''

import os as _os
import socket as _socket
import threading as _threading


def _report(name, what):
    print("REPORT", name, what, flush=True)


def _attempt(name, action):
    try:
        action()
        _report(name, "done")
    except Exception as exc:
        _report(name, "refused:" + type(exc).__name__)


_attempt("socket", lambda: _socket.socket(_socket.AF_INET, _socket.SOCK_STREAM))
_attempt("write", lambda: open(OUTSIDE + "/written", "w").write("x"))
_release = _threading.Event()
_started = []


def _flood():
    for _ in range(64):
        thread = _threading.Thread(target=_release.wait, args=(30,), daemon=True)
        thread.start()
        _started.append(thread)


_attempt("threads", _flood)
_release.set()
for _thread in _started:
    _thread.join()


def _backend_work():
    import keras
    backend = keras.backend.backend()
    if backend == "jax":
        import jax
        jax.config.update("jax_compilation_cache_dir", OUTSIDE + "/jax-cache")
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
        jax.jit(lambda x: x * 2 + 1)(keras.ops.ones((64, 64)))
    elif backend == "torch":
        import torch
        torch.ones(512, 512) @ torch.ones(512, 512)
    _report("tasks", len(_os.listdir("/proc/self/task")))


_attempt("backend", _backend_work)
'''


@pytest.mark.parametrize("backend", OTHER_BACKENDS)
def test_the_confinement_holds_on_every_backend(backend, tmp_path):
    """On JAX and PyTorch as on TensorFlow: every measure applies, no socket opens, nothing is written
    outside the scratch folder (JAX's compilation cache included), threads stay within the process cap,
    and the correct layer still passes."""
    outside = tmp_path / "outside"
    outside.mkdir()
    source = exercises.get("exercise3").solution.read_text(encoding="utf-8") + \
        f"\nOUTSIDE = {str(outside)!r}\n" + PROBING
    path = tmp_path / "exercise3.py"
    path.write_text(source, encoding="utf-8")
    from grader.api import grade
    from grader.sandbox.process import MAX_PROCESSES

    verdict = grade("exercise3", path, Settings(seed=3, backend=backend, timeout=SLOW_BACKEND_TIMEOUT))
    reports = dict(line.split(" ", 2)[1:] for line in verdict.context.get("output", "").splitlines()
                   if line.startswith("REPORT "))
    assert verdict.status == "passed", (verdict.error, reports)
    assert verdict.context["backend"] == backend
    assert reports["socket"].startswith("refused:") and reports["write"].startswith("refused:")
    assert reports["threads"].startswith("refused:")  # the process cap ends the 64 threads
    assert int(reports["tasks"]) <= MAX_PROCESSES
    assert list(outside.iterdir()) == []
    claims = verdict.context.get("confinement") or {}
    assert claims.get("seccomp") is True and claims["landlock"]["applied"]
    assert "Landlock" in verdict.context["sandbox"] and "seccomp" in verdict.context["sandbox"]


# ----------------------------------------------------------------------------- batch, watch, platforms
@pytest.mark.slow
@needs_jax
def test_batch_and_platform_results_on_jax(tmp_path):
    """`grade batch --backend jax` grades every file on JAX (its run.json says so), and a single grading's
    Gradescope results carry the backend."""
    mistakes, _ = catalog("exercise3")
    shared = next(m for m in mistakes if m.name == "shared_norm")
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "good.py").write_text(exercises.get("exercise3").solution.read_text(encoding="utf-8"), encoding="utf-8")
    (folder / "shared.py").write_text(shared.source, encoding="utf-8")
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "grader", "batch", str(folder), "--exercise", "exercise3",
                             "--out", str(out), "--backend", "jax", "--seed", "5", "--timeout",
                             str(SLOW_BACKEND_TIMEOUT)], capture_output=True, text=True)
    assert result.returncode in (0, 1), result.stderr
    lines = [json.loads(line) for line in (out / "verdicts.jsonl").read_text(encoding="utf-8").splitlines()]
    assert {line["backend"] for line in lines} == {"jax"}
    assert sorted(line["status"] for line in lines) == ["failed", "passed"]
    assert json.loads((out / "run.json").read_text(encoding="utf-8"))["backend"] == "jax"

    results = tmp_path / "results.json"
    result = subprocess.run([sys.executable, "-m", "grader", "exercise3", "--submission", str(folder / "good.py"),
                             "--gradescope-results", str(results), "--timeout", str(SLOW_BACKEND_TIMEOUT)],
                            capture_output=True, text=True,
                            env=dict(os.environ, GRADE_BACKEND="jax"))
    assert result.returncode == 0, result.stderr
    written = json.loads(results.read_text(encoding="utf-8"))
    assert written["extra_data"]["backend"] == "jax" and "(on JAX)" in written["output"]


@pytest.mark.slow
@needs_jax
def test_watch_forks_from_a_worker_that_preloaded_jax(tmp_path, monkeypatch):
    import io

    import watchfiles
    from rich.console import Console

    from grader import workers as warm
    from grader.cli import grading as cli

    exercise = exercises.get("exercise3")
    solution = exercise.solution.read_text(encoding="utf-8")
    submission = tmp_path / "exercise3.py"
    submission.write_text(solution.replace(*TENSOR_CHECKED_MASK), encoding="utf-8")
    workers = []

    class Recording(warm.Workers):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            workers.append(self)

    def saves(*args, **kwargs):
        submission.write_text(solution, encoding="utf-8")
        yield {(watchfiles.Change.modified, str(submission))}

    verdicts = []
    show = cli.grade_and_show
    monkeypatch.setattr(warm, "Workers", Recording)
    monkeypatch.setattr(watchfiles, "watch", saves)
    monkeypatch.setattr(cli, "grade_and_show", lambda *a, **k: verdicts.append(show(*a, **k)) or verdicts[-1])
    settings = Settings(seed=4, backend="jax", timeout=SLOW_BACKEND_TIMEOUT)
    code = cli.watch(exercise, submission, settings, Console(file=io.StringIO(), width=100))
    assert [w.backend for w in workers] == ["jax"]
    assert [v.context["backend"] for v in verdicts] == ["jax", "jax"]
    assert [v.status for v in verdicts] == ["failed", "passed"] and code == 0  # the mask is ignored on JAX, then fixed


@pytest.mark.slow
@needs_jax
def test_tf_keras_is_keras_and_passes_on_jax(tmp_path):
    """`tf.keras` is Keras itself, on whichever backend runs: a layer built from it is no TensorFlow call."""
    solution = exercises.get("exercise3").solution.read_text(encoding="utf-8")
    old = '                layers.Dense(dense_dim, activation="relu"),'
    assert solution.count(old) == 1
    path = tmp_path / "exercise3.py"
    path.write_text("import tensorflow as tf\n" + solution.replace(old, old.replace("layers.", "tf.keras.layers.")),
                    encoding="utf-8")
    code, verdict = _grade_json("exercise3", "--submission", str(path), "--backend", "jax")
    assert code == 0 and verdict["status"] == "passed", verdict["error"]


def test_all_backends_says_why_a_backend_could_not_grade_as_its_own_run_does():
    """The view under the report, drawn from a comparison: a backend whose verdict is an error shows
    the reason its single-backend run gives, not only that it could not be graded."""
    import io

    from rich.console import Console

    from grader.portability import Comparison, Difference
    from grader.report import backends_view
    from grader.verdict import CheckResult, error_verdict, summarise

    passed = summarise("exercise1", "/work/exercise1.py",
                       [CheckResult("api.constructor", "Constructor", "api", "passed", 2.0, 2.0, "")], {})
    why = ("your layer calls TensorFlow directly (tf.shape at line 16): it runs only on the TensorFlow backend, "
           "not on JAX; keras.ops.shape runs on all three")
    on_jax = error_verdict("exercise1", "/work/exercise1.py", f"The submission could not be graded on JAX: {why}.",
                           2.0, {})
    broken = error_verdict("exercise1", "/work/exercise1.py", "Importing your file raised an error:\n"
                           "  NameError: name 'x' is not defined\n  at line 12, in <module>: print(x)", 2.0, {})
    comparison = Comparison("tensorflow", {"tensorflow": passed, "jax": on_jax, "torch": broken},
                            [Difference("jax", check_detail="TensorFlow: passed, JAX: error"),
                             Difference("torch", check_detail="TensorFlow: passed, PyTorch: error")])
    console = Console(file=io.StringIO(), width=100, color_system=None)
    console.print(backends_view(comparison))
    shown = " ".join(console.file.getvalue().replace("│", " ").split())
    assert "JAX could not be graded differs your layer calls TensorFlow directly (tf.shape at line 16)" in shown
    assert "keras.ops.shape runs on all three" in shown
    assert "NameError: name 'x' is not defined at line 12" in shown
    assert "The submission could not be graded on JAX" not in shown  # the row says it already


# ----------------------------------------------------------------------------- the tensor operators
OPERATORS_SCRIPT = r'''
import json, keras, numpy as np
from grader.probe.runtime import tensor_classes
from grader.probe.op_tape import _OPERATORS, OpRecorder, OpTape

x = keras.ops.convert_to_tensor(np.arange(1.0, 5.0).reshape(2, 2))
b = keras.ops.convert_to_tensor(np.array([[True, False], [False, True]]))
tape = OpTape({"x": x, "b": b})
recorded, missing = [], []
with OpRecorder(lambda: tape):
    for dunder, (name, _) in _OPERATORS.items():
        operand = b if name.startswith("logical") else x
        if not hasattr(type(operand), dunder):
            missing.append(dunder)
            continue
        method = getattr(operand, dunder)
        count = len(tape.records)
        if dunder in ("__neg__", "__invert__", "__abs__"):
            method()
        elif dunder == "__getitem__":
            method(0)
        else:
            method(x if name == "matmul" else b if name.startswith("logical") else 2.0)
        recorded.append([dunder, [r["op"] for r in tape.records[count:]]])
print(json.dumps({"classes": [c.__name__ for c in tensor_classes()], "recorded": recorded, "missing": missing}))
'''


@pytest.mark.parametrize("backend", [pytest.param("tensorflow"), *OTHER_BACKENDS])
def test_every_tensor_operator_is_recorded_on_every_backend(backend):
    """A custom layer's arithmetic, comparisons, logic and indexing on the backend's own tensors (not
    only keras.ops) are what the replay follows: each operator the tape hooks records exactly its own
    operation, on TensorFlow's tensors, JAX's arrays and PyTorch's tensors alike."""
    from grader.probe.op_tape import _OPERATORS

    shown = subprocess.run([sys.executable, "-c", OPERATORS_SCRIPT], capture_output=True, text=True,
                           env={**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"})
    assert shown.returncode == 0, shown.stderr[-3000:]
    result = json.loads(shown.stdout.strip().splitlines()[-1])
    assert result["classes"] and result["missing"] == []
    assert {dunder: ops for dunder, ops in result["recorded"]} == {
        dunder: [name] for dunder, (name, _) in _OPERATORS.items()}
