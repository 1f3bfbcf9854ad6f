"""Code that runs inside the grading child process, next to the student's code.

Nothing here decides a verdict. The child imports TensorFlow, loads the
submission, exercises it in a few phases and streams plain data (numbers,
shapes, configs, call traces) back to the parent, one JSON line per phase.
This package is what the exercises' probes are written with (the phases every
layer shares, the tracer, the evidence stream, the backend's runtime); where a
grading process starts is ``grader.child``.
"""
