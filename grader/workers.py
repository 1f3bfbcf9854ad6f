"""The warm worker: a process of the grader's own that imported TensorFlow (or the backend asked for)
and the probes once, from which each grading's child is forked, with the same scratch copy, limits,
confinement and evidence protocol as a fresh grading process. ``grade batch``, ``grade --watch``, the
grading server and ``tools.check_exercises`` grade through it.
"""

from __future__ import annotations

from .sandbox import forkserver
from .sandbox.process import GradingProcess


class Workers:
    """The runner of ``grade batch``, of ``--watch`` and of the grading server (``grader.server``): one
    worker with TensorFlow imported (``grader.sandbox.forkserver``, replaced whenever it fails), and
    one forked child per submission."""

    def __init__(self, ready_seconds: float = forkserver.READY_SECONDS,
                 fork_seconds: float = forkserver.FORK_SECONDS, backend: str = "tensorflow"):
        # Start importing Keras and its backend in the worker now, and meanwhile the judge server's
        # own imports (pytest, the checks), which the first result would otherwise wait for. A
        # worker preloads one backend: its forks grade on that backend only.
        from .sandbox.process import child_environment, fresh_environment

        self.backend = backend
        environment = dict(fresh_environment(), **child_environment(), KERAS_BACKEND=backend)
        self.server = forkserver.ForkServer(ready_seconds, fork_seconds, environment=environment)
        from .judging.client import shared_judges

        shared_judges()

    def __call__(self, job: dict, source: str, timeout: float, memory_mb: int, respond=None) -> "ForkedChild":
        return ForkedChild(self.server, job, source, timeout, memory_mb, respond)

    @property
    def pid(self) -> int | None:
        """The current worker's process id (None between a failure and the next start)."""
        return self.server.worker.pid if self.server.worker is not None else None

    def close(self) -> None:
        self.server.close()


class ForkedChild(GradingProcess):
    """One submission in a child forked by the worker; the same waiting and results as ``sandbox.Child``."""

    def __init__(self, server: "forkserver.ForkServer", job: dict, source: str, timeout: float, memory_mb: int,
                 respond=None):
        self._server = server
        self.pid: int | None = None
        super().__init__(job, source, timeout, memory_mb, respond)

    def _launch(self, descriptors: list[int], environment: dict) -> int:
        self.pid, pidfd = self._server.fork(descriptors, {"environment": environment})
        return pidfd
