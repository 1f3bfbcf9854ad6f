"""Entry point of a grading child: ``python -I -m grader.child EVIDENCE_FD CONTROL_FD STATUS_FD``.

The process started this way is the keeper (``reaper.keep``): it reads the
public part of the job (JSON) from stdin and runs the grading process in its
own namespaces. The grading process imports TensorFlow, confines itself
(``confine``), loads the submission from the scratch folder it runs in and
streams evidence to the inherited pipe; the probe reads the secret part of the
job from the control pipe once the layer is built. Everything the student
prints goes to stdout/stderr, which the parent caps and never reads as a
result. The probe is bound before the student's code is loaded, and the
process leaves with ``os._exit``, so ``atexit`` handlers and late patches
change nothing.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import inspect
import json
import os
import sys
import time
import warnings

EVIDENCE_FD, CONTROL_FD, STATUS_FD = 3, 4, 5


def main() -> None:
    evidence, control, status = (int(arg) for arg in sys.argv[1:4])
    settle_descriptors(0, 1, 2, evidence, control, status)
    job = json.loads(sys.stdin.read())
    start(job)


def settle_descriptors(stdin: int, stdout: int, stderr: int, evidence: int, control: int, status: int) -> None:
    """Put the six descriptors of a grading at 0..5 and close every other one (stdin: the job)."""
    import fcntl

    moved = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (stdin, stdout, stderr, evidence, control, status)]
    for target, fd in enumerate(moved):
        os.dup2(fd, target)  # the copies at 0..5 are inherited; the rest is closed below
    os.closerange(6, _max_descriptor())


def _max_descriptor() -> int:
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return soft if soft != resource.RLIM_INFINITY else 1 << 20


def start(job: dict) -> None:
    """In the keeper, with descriptors settled and the job read: run the grading; never returns."""
    from ..sandbox import privileges, reaper
    from ..probe.evidence_stream import EvidenceStream

    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    limits = job["limits"]
    fairness = privileges.share_fairly(limits)
    privileges.limit_resources(limits["memory_mb"], limits["file_bytes"])

    def body(setup: dict) -> None:
        run_job(job, EvidenceStream(EVIDENCE_FD, job["submission"], control_fd=CONTROL_FD), setup)

    reaper.keep(job, body, EVIDENCE_FD, CONTROL_FD, STATUS_FD, fairness)


def run_job(job: dict, stream, setup: dict) -> None:
    """Every phase of one job, then leave the process (never returns)."""
    from ..sandbox.confine import confine
    from ..probe.direct_calls import DirectCalls
    from ..protocol import limits

    submission = job["submission"]
    scratch = os.path.dirname(submission)
    probe = None

    with stream.phase("runtime") as data:
        from ..protocol.job import JOB_FORMAT, check_grader

        if job.get("format") != JOB_FORMAT:  # a grader and a child of different versions
            raise RuntimeError(f"a job of format {job.get('format')!r}; this child reads format {JOB_FORMAT}")
        check_grader(job)  # the same package as the grader's, not another installation on the path
        started = time.perf_counter()
        warnings.simplefilter("default")
        from ..probe import runtime

        backend = job.get("backend", "tensorflow")
        runtime.select(backend)  # before Keras is imported (the batch worker imported it with the same)
        data["backend"] = backend
        data.update(runtime.start_runtime(backend, job["limits"].get("compiled")))  # as the confinement reads it
        import keras

        # a grading job runs its exercise's probe; another kind of job (``grade explain``) names its own;
        # bound before any student code
        probe = importlib.import_module(job.get("probe") or f"grader.exercises.{job['exercise']}.probe").run

        data["python"] = sys.version.split()[0]
        data["import_seconds"] = time.perf_counter() - started
        keras.utils.set_random_seed(0)  # Keras's own initialisers; every weight is set by the parent later
        try:
            data["sandbox"] = confine(scratch, setup, job["limits"])
        except BaseException as exc:
            data["sandbox_error"] = f"{type(exc).__name__}: {exc}"[:500]
            raise

    if probe is None or "sandbox" not in data:  # nothing else may run
        _leave(stream)
    gc.freeze()  # the libraries just imported are never garbage: collections walk the submission's objects only

    import keras

    cls = None
    with stream.phase("load") as data:
        data["class_name"] = job["class_name"]
        spec = importlib.util.spec_from_file_location("submission", submission)
        module = importlib.util.module_from_spec(spec)
        sys.modules["submission"] = module
        cells = job.get("cells") or []
        if cells:
            _run_cells(module, submission, cells, stream)
        else:
            spec.loader.exec_module(module)
        candidate = getattr(module, job["class_name"], None)
        data["class_found"] = candidate is not None
        data["is_class"] = isinstance(candidate, type)
        data["is_callable"] = callable(candidate)
        data["bases"] = [f"{c.__module__}.{c.__qualname__}" for c in getattr(candidate, "__mro__", ())[1:4]]
        data["is_layer_subclass"] = isinstance(candidate, type) and issubclass(candidate, keras.layers.Layer)
        data["defined_names"] = sorted(
            name for name, value in vars(module).items()
            if (isinstance(value, type) or inspect.isfunction(value)) and not name.startswith("_")
        )[:limits.MAX_NAMES]
        data["signature_error"] = None
        gradable = data["is_callable"] and not data["is_class"] if job["kind"] == "function" \
            else data["is_layer_subclass"]
        if gradable:
            data["signature"] = _signature(candidate)
            try:
                inspect.signature(candidate).bind(**job["constructor_arguments"])
            except TypeError as exc:
                data["signature_error"] = str(exc)
            except ValueError:
                pass  # no signature to inspect: calling will tell
            if data["signature_error"] is None:
                cls = candidate

    if cls is not None:
        watcher = DirectCalls(submission)
        watching = watcher.wanted(module)
        if watching:
            watcher.start()
        try:
            probe(cls, job, stream, scratch)
        finally:
            if watching:
                watcher.stop()
        if watcher.lines:  # only line numbers: the parent reads its own copy of the source
            with stream.phase("tensorflow_calls") as data:
                data["lines"] = list(watcher.lines)
    _leave(stream)


def _run_cells(module, path: str, cells: list, stream) -> None:
    """A notebook's code, cell by cell, so that a cell that never finishes can be named. Each cell
    is compiled at its own lines of the file, so tracebacks point where a whole-file run would."""
    with open(path, encoding="utf-8") as handle:
        lines = handle.read().splitlines(keepends=True)
    for first, last, number in cells:
        stream.emit({"event": "start", "phase": f"load:cell {int(number)}"})
        chunk = "".join(lines[int(first) - 1:int(last)])
        exec(compile("\n" * (int(first) - 1) + chunk, path, "exec"), module.__dict__)


def _signature(cls) -> str:
    try:
        return f"{cls.__name__}{inspect.signature(cls)}"
    except (TypeError, ValueError):
        return cls.__name__


def _leave(stream) -> None:
    stream.emit({"event": "done"})
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(0)


if __name__ == "__main__":
    main()
