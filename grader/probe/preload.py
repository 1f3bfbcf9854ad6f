"""Imported once by the batch worker (``grader.probe.worker``) before it forks any child.

It imports TensorFlow, Keras, the probes and the confinement, so each forked
child starts with them loaded, but it runs no TensorFlow operation: the runtime
(its thread pools) is created fresh in each child, after the fork. TensorFlow's
start-up messages of the worker itself are dropped.
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
_saved_stderr = os.dup(2)
_null = os.open(os.devnull, os.O_WRONLY)
os.dup2(_null, 2)
os.close(_null)
try:
    import keras  # noqa: F401
    import numpy  # noqa: F401
    import tensorflow  # noqa: F401

    from ..sandbox import confine, kernel, landlock, namespaces, privileges, reaper, seccomp
    from . import describe, evidence_stream, tracing
    from ..exercises.exercise1 import probe as exercise1
    from ..exercises.exercise2 import probe as exercise2
    from ..exercises.exercise3 import probe as exercise3
    from ..exercises.exercise4 import probe as exercise4
    from ..exercises.exercise5 import probe as exercise5
    from . import layer_phases  # noqa: F401
finally:
    os.dup2(_saved_stderr, 2)
    os.close(_saved_stderr)
