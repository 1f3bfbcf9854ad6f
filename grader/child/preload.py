"""Imported once by the batch worker (``grader.child.worker``) before it forks any child.

It imports Keras on the backend the worker was started for (``KERAS_BACKEND``:
TensorFlow, JAX or PyTorch, with the backend's library, and TensorFlow wherever
it is installed, which every grading's seeding of Keras imports), the probes and the
confinement, so each forked child starts with them loaded, but it runs no
operation of the backend: the runtime (its thread pools, JAX's CPU client,
PyTorch's pools) is created fresh in each child, after the fork. A worker serves
gradings of its own backend only (the child refuses another). The backend's
start-up messages of the worker itself are dropped.

The garbage collector is paused while it imports (``runtime.collector_paused``;
``runtime.import_libraries`` says why); the worker's loop then freezes what it imported
(``grader.sandbox.forkloop``).
"""

import importlib
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
_saved_stderr = os.dup(2)
_null = os.open(os.devnull, os.O_WRONLY)
os.dup2(_null, 2)
os.close(_null)
try:
    from ..probe import runtime

    with runtime.collector_paused():
        runtime.preload(os.environ.get("KERAS_BACKEND", "tensorflow"))
        from ..exercises import EXERCISES
        from ..sandbox import confine, kernel, landlock, namespaces, privileges, reaper, seccomp  # noqa: F401
        from ..probe import describe, evidence_stream, layer_phases, tracing  # noqa: F401

        for _exercise in EXERCISES.values():
            importlib.import_module(_exercise.probe_module)
finally:
    os.dup2(_saved_stderr, 2)
    os.close(_saved_stderr)
