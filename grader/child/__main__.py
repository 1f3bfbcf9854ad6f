"""Entry point of the grading child: ``python -I -m grader.child EVIDENCE_FD``.

Reads the job (JSON) from stdin, loads the submission from the scratch folder
it runs in, and streams evidence to the inherited pipe. Everything the student
prints goes to stdout/stderr, which the parent captures and caps; nothing the
child prints is ever read as a result.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import time
import warnings


def main() -> None:
    private_fd = os.dup(int(sys.argv[1]))
    os.close(int(sys.argv[1]))
    job = json.loads(sys.stdin.read())
    stdin = os.open(os.devnull, os.O_RDONLY)
    os.dup2(stdin, 0)

    from .evidence_stream import EvidenceStream

    submission = job["submission"]
    stream = EvidenceStream(private_fd, submission)

    with stream.phase("runtime") as data:
        started = time.perf_counter()
        warnings.simplefilter("default")
        import keras
        import numpy
        import tensorflow

        tensorflow.get_logger().setLevel("ERROR")
        data["python"] = sys.version.split()[0]
        data["tensorflow"] = tensorflow.__version__
        data["keras"] = keras.__version__
        data["numpy"] = numpy.__version__
        data["import_seconds"] = time.perf_counter() - started
        keras.utils.set_random_seed(int(job["seed"]))

    if "keras" not in sys.modules:  # the runtime phase failed; nothing else can run
        stream.emit({"event": "done"})
        os._exit(0)

    import keras

    cls = None
    with stream.phase("load") as data:
        data["class_name"] = job["class_name"]
        spec = importlib.util.spec_from_file_location("submission", submission)
        module = importlib.util.module_from_spec(spec)
        sys.modules["submission"] = module
        spec.loader.exec_module(module)
        candidate = getattr(module, job["class_name"], None)
        data["class_found"] = candidate is not None
        data["is_class"] = isinstance(candidate, type)
        data["bases"] = [f"{c.__module__}.{c.__qualname__}" for c in getattr(candidate, "__mro__", ())[1:4]]
        data["is_layer_subclass"] = isinstance(candidate, type) and issubclass(candidate, keras.layers.Layer)
        data["defined_names"] = sorted(
            name for name, value in vars(module).items() if isinstance(value, type)
        )[:50]
        if data["is_class"]:
            cls = candidate

    if cls is not None:
        probe = importlib.import_module(f"grader.child.probes.{job['exercise']}")
        probe.run(cls, job, stream, os.getcwd())
    stream.emit({"event": "done"})
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
