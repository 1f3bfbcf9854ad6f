"""The grader's side of judging: start a judge for one submission, wait for its answer, or end it.

``Judges`` holds the judge server (``grader.sandbox.forkserver.ForkServer`` running
``grader.judging.server``), started once per grader process and replaced if it
fails; ``Judges.start`` forks one judge and hands it its request. A ``JudgeRun``
is waited for through a pidfd, like a grading process: ``ready()`` without
blocking, ``wait()`` with the judge's wall-clock limit, after which the judge is
killed. Its answer is read by a thread with a cap on its size, and its request
written by another, so neither a judge that does not read nor one that writes
without end can stall the grader.
"""

from __future__ import annotations

import math
import os
import signal
import threading
import time

from ..protocol.limits import MAX_ANSWER_BYTES
from ..sandbox import forkserver
from ..sandbox.pipes import CUT, read_capped, readable, write_all

# What one judge may hold: its address space, and where the grader can make control groups, its
# memory in all (a group of its own). The judge server, forked, is about 125 MB of address space; a
# correct submission's judge holds about 45 MB; the largest request a judge reads (grader.protocol.
# limits.MAX_REQUEST_BYTES: the evidence and the secrets at their limits) fits with room to spare. A
# grader running J gradings at once runs at most J judges: J times this in all.
JUDGE_MEMORY_MB = 512
JUDGE_PROCESSES = 8
JUDGE_GRACE = 15.0  # seconds a judge gets beyond its checks' own time limit before it is killed
SERVER_MODULE = "grader.judging.server"
# One thread for NumPy's BLAS: a judge computes on small arrays, and forks of a server whose BLAS
# started a pool of threads would each inherit a pool that is not there.
JUDGE_ENV = {"OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
             "PYTHONDONTWRITEBYTECODE": "1", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


class JudgeFailed(Exception):
    """No answer from a judge: the message says why, in words for a report."""


class Judges:
    """The judge server of this grader process, and the judges forked from it."""

    def __init__(self, memory_mb: int = JUDGE_MEMORY_MB, grace: float = JUDGE_GRACE):
        from ..sandbox.process import fresh_environment

        self.memory_mb = memory_mb
        self.grace = grace
        self.server = forkserver.ForkServer(module=SERVER_MODULE, environment=dict(fresh_environment(), **JUDGE_ENV))
        self._lock = threading.Lock()

    def start(self, request: bytes, checks_timeout: float) -> "JudgeRun":
        """Fork a judge for ``request``, in a control group of its own where one can be made; raises
        JudgeFailed if the server cannot."""
        from ..sandbox import cgroups

        memory = int(self.memory_mb) * 1024 * 1024
        limits = {"memory_bytes": memory, "cpu_seconds": max(1, math.ceil(checks_timeout + self.grace))}
        group = None
        hierarchy, _ = cgroups.hierarchy()
        if hierarchy is not None:
            try:
                group = hierarchy.new_group(memory, JUDGE_PROCESSES)
                limits["cgroups"] = group.procs
            except OSError:
                group = None  # the address space still bounds it
        try:
            return JudgeRun(self, request, checks_timeout + self.grace, limits, group)
        except BaseException:
            if group is not None:
                group.remove()
            raise

    def _fork(self, descriptors: list[int], limits: dict) -> int:
        with self._lock:
            try:
                return self.server.fork(descriptors, {"limits": limits})[1]
            except forkserver.WorkerFailed:
                pass  # the server that failed is replaced: once more, on the new one
            try:
                return self.server.fork(descriptors, {"limits": limits})[1]
            except forkserver.WorkerFailed as exc:
                raise JudgeFailed(f"the grader could not start a judge ({exc})") from None

    def close(self) -> None:
        self.server.close()


class JudgeRun:
    """One judge, started at construction."""

    def __init__(self, judges: Judges, request: bytes, seconds: float, limits: dict, group=None):
        self._group = group
        request_read, request_write = os.pipe()
        answer_read, answer_write = os.pipe()
        try:
            self._pidfd = judges._fork([request_read, answer_write], limits)
        except BaseException:
            for fd in (request_write, answer_read):
                os.close(fd)
            raise
        finally:
            os.close(request_read)
            os.close(answer_write)
        self._started = time.monotonic()
        self._seconds = seconds
        self._answer: list[bytes] = []
        self._result: tuple[bytes | None, str | None] | None = None
        self._writer = threading.Thread(target=_deliver, args=(request_write, request), daemon=True)
        self._reader = threading.Thread(target=read_capped, daemon=True,
                                        args=(answer_read, self._answer, MAX_ANSWER_BYTES))
        self._writer.start()
        self._reader.start()

    @property
    def sentinel(self) -> int:
        """Readable when the judge has ended."""
        return self._pidfd

    def seconds_left(self) -> float:
        return max(0.0, self._seconds - (time.monotonic() - self._started))

    def ready(self) -> bool:
        return self._result is not None or readable(self._pidfd, 0) or self.seconds_left() <= 0

    def kill(self) -> None:
        self._seconds = 0.0
        self.wait()

    def wait(self) -> tuple[bytes | None, str | None]:
        """(answer, None), or (None, why there is none); the judge is gone after."""
        if self._result is not None:
            return self._result
        overran = not readable(self._pidfd, self.seconds_left())
        if overran:
            try:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
            readable(self._pidfd, 10.0)
        self._reader.join(10.0)
        self._writer.join(10.0)
        os.close(self._pidfd)
        out_of_memory = False
        if self._group is not None:
            out_of_memory = self._group.out_of_memory()
            self._group.remove()
            self._group = None
        data = b"".join(chunk for chunk in self._answer if chunk is not CUT)
        if out_of_memory and not data:
            self._result = None, "the grader could not judge this submission's evidence within its memory limit"
        elif overran:
            self._result = None, "the grader could not judge this submission's evidence within its time limit"
        elif any(chunk is CUT for chunk in self._answer) or self._reader.is_alive():
            self._result = None, "the grader's judge of this submission's evidence answered more than it may"
        elif not data:
            self._result = None, ("the grader could not judge this submission's evidence within its limits (its "
                                  "judge ended without an answer)")
        else:
            self._result = data, None
        return self._result


def _deliver(fd: int, data: bytes) -> None:
    try:
        write_all(fd, data)
    except OSError:
        pass  # the judge is gone: its end tells how
    finally:
        os.close(fd)


_shared: Judges | None = None
_shared_lock = threading.Lock()


def shared_judges() -> Judges:
    """This process's judges, started on first use (the server's imports then overlap the first
    grading process's)."""
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = Judges()
        return _shared


def shared_judges_pid() -> int | None:
    """The process id of this process's judge server, if it has one running."""
    with _shared_lock:
        worker = _shared.server.worker if _shared is not None else None
        return worker.pid if worker is not None else None


def close_shared_judges() -> None:
    """End this process's judge server, if it started one (``shared_judges`` would start another)."""
    global _shared
    with _shared_lock:
        if _shared is not None:
            _shared.close()
            _shared = None
