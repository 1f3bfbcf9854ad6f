"""Entry point of a batch child: forked from the worker that has TensorFlow imported.

It becomes a new session (so the parent can kill it and anything it starts),
takes the same limits as a fresh child, sends its own stdout and stderr to
files the parent reads, and runs the same phases (``__main__.run_job``).
"""

from __future__ import annotations

import json
import os
import resource
import tempfile


def run(job_text: str, connection, control, stdout_path: str, stderr_path: str, memory_mb: int,
        file_bytes: int, environment: dict) -> None:
    os.setsid()
    limit = int(memory_mb) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)
    for fd, path in ((1, stdout_path), (2, stderr_path)):
        os.dup2(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), fd)
    job = json.loads(job_text)
    os.environ.update(environment)
    tempfile.tempdir = None  # the worker chose /tmp before the fork; choose again from TMPDIR
    os.chdir(os.path.dirname(job["submission"]))

    from .__main__ import run_job
    from .evidence_stream import EvidenceStream

    run_job(job, EvidenceStream(None, job["submission"], send=connection.send_bytes, receive=control.recv_bytes))
