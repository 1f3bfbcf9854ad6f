"""Entry point of the grading child: ``python -I -m grader.child EVIDENCE_FD CONTROL_FD``.

Reads the public part of the job (JSON) from stdin, imports TensorFlow,
confines itself (``landlock``), loads the submission from the scratch folder
it runs in and streams evidence to the inherited pipe; the probe reads the
secret part of the job from the control pipe once the layer is built. Everything the student prints goes to
stdout/stderr, which the parent caps and never reads as a result. The probe is
bound before the student's code is loaded, and the child leaves with
``os._exit``, so ``atexit`` handlers and late patches change nothing.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import os
import sys
import time
import warnings


def main() -> None:
    private_fd = os.dup(int(sys.argv[1]))
    os.close(int(sys.argv[1]))
    control_fd = os.dup(int(sys.argv[2]))
    os.close(int(sys.argv[2]))
    job = json.loads(sys.stdin.read())
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)

    from .evidence_stream import EvidenceStream

    run_job(job, EvidenceStream(private_fd, job["submission"], control_fd=control_fd))


def run_job(job: dict, stream) -> None:
    """Every phase of one job, then leave the process (never returns)."""
    from .landlock import python_paths, restrict

    submission = job["submission"]
    scratch = os.path.dirname(submission)
    # a grading job runs its exercise's probe; another kind of job (``grade explain``) names its own
    probe = importlib.import_module(f"grader.child.probes.{job.get('probe', job['exercise'])}").run

    with stream.phase("runtime") as data:
        started = time.perf_counter()
        warnings.simplefilter("default")
        import keras
        import numpy
        import tensorflow

        tensorflow.get_logger().setLevel("ERROR")
        tensorflow.config.threading.set_intra_op_parallelism_threads(1)
        tensorflow.config.threading.set_inter_op_parallelism_threads(1)
        data["python"] = sys.version.split()[0]
        data["tensorflow"] = tensorflow.__version__
        data["keras"] = keras.__version__
        data["numpy"] = numpy.__version__
        data["import_seconds"] = time.perf_counter() - started
        keras.utils.set_random_seed(0)  # Keras's own initialisers; every weight is set by the parent later
        data["sandbox"] = restrict(scratch, python_paths()) if job.get("sandbox", True) else {
            "applied": False, "reason": "turned off"}

    if "keras" not in sys.modules:  # the runtime phase failed; nothing else can run
        _leave(stream)

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
        )[:50]
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
        probe(cls, job, stream, scratch)
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
