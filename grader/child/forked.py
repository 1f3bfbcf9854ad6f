"""A batch child: forked by the worker (``grader.child.worker``), which has TensorFlow imported.

Before anything else it keeps only the six descriptors the grader sent for
this grading (stdin with the job, stdout, stderr, evidence, control, status)
and closes every other one, the worker's socket included; it replaces the
worker's environment with the grading's own. Then it is the keeper of this
grading, exactly as a fresh ``python -m grader.child`` is (``__main__.start``).
"""

from __future__ import annotations

import json
import os
import signal


def run(descriptors: list[int], environment: dict) -> None:
    """Never returns."""
    try:
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        from .__main__ import settle_descriptors, start

        settle_descriptors(*descriptors)
        os.environ.clear()
        os.environ.update({str(k): str(v) for k, v in environment.items()})
        import tempfile

        tempfile.tempdir = None  # the worker chose /tmp before the fork; choose again from TMPDIR
        job = json.loads(_read_all(0))  # empty when the grader gave up on this start: nothing runs
        start(job)
    finally:
        os._exit(70)


def _read_all(fd: int) -> bytes:
    chunks = []
    while True:
        block = os.read(fd, 1 << 16)
        if not block:
            return b"".join(chunks)
        chunks.append(block)
