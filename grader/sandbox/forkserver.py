"""The grader's side of its fork servers: start one, fork through it, replace it.

Two servers share this: the batch worker (``grader.child.worker``), which has
TensorFlow imported and forks one grading process per submission, and the
judge server (``grader.judging.server``), which has NumPy, autograd, pytest and
the checks imported and forks one judge per submission. A server is started
with one end of an anonymous socketpair and nothing else of the grader's: a
minimal environment, stdio on /dev/null, its own session. Each fork is a
request with the fork's descriptors and a reply with a pidfd of the fork, each
within a time limit: a server that does not become ready, does not answer,
answers nonsense or dies is killed and replaced (``ForkServer``), and the
request is made again, with new pipes, on the new one. Forks already running
do not depend on the server: their pipes lead to the grader, and their pidfds
stay valid whatever happens to it.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys

from .process import LaunchFailed, child_environment, fresh_environment

READY_SECONDS = 600.0  # importing TensorFlow, on a busy machine
FORK_SECONDS = 30.0  # one fork of the worker
MAX_REPLY = 4096


class WorkerFailed(LaunchFailed):
    """The worker did not start a grading: it is dead, stalled or answered nonsense."""


GRADING_WORKER = "grader.child.worker"


class Worker:
    """One server process (``module``, run as ``python -I -m module SOCKET_FD GRADER_PID``) and the
    grader's end of its channel."""

    def __init__(self, module: str = GRADING_WORKER, environment: dict | None = None):
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        if environment is None:
            environment = dict(fresh_environment(), **child_environment())
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-I", "-m", module, str(theirs.fileno()), str(os.getpid())],
                pass_fds=(theirs.fileno(),), env=environment,
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True, cwd="/",
            )
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._channel = ours
        self._ready = False

    @property
    def pid(self) -> int:
        return self.process.pid

    def fork(self, descriptors: list[int], request: dict, ready_seconds: float = READY_SECONDS,
             fork_seconds: float = FORK_SECONDS) -> tuple[int, int]:
        """Fork once, handing the fork ``descriptors`` and ``request``; (pid, pidfd). Raises WorkerFailed."""
        if not self._ready:
            reply, _ = self._receive(ready_seconds, "become ready")
            if reply != {"ready": True}:
                raise WorkerFailed("the worker did not say it was ready")
            self._ready = True
        try:
            socket.send_fds(self._channel, [json.dumps(request).encode()], descriptors)
        except OSError as exc:
            raise WorkerFailed(f"the worker cannot be reached ({exc.strerror or exc})") from None
        reply, received = self._receive(fork_seconds, "fork")
        if not isinstance(reply.get("pid"), int) or len(received) != 1:
            for fd in received:
                os.close(fd)
            raise WorkerFailed(f"the worker could not fork ({str(reply.get('error', reply))[:200]})")
        return reply["pid"], received[0]

    def _receive(self, seconds: float, what: str) -> tuple[dict, list[int]]:
        poller = select.poll()
        poller.register(self._channel, select.POLLIN)
        if not poller.poll(int(seconds * 1000)):
            raise WorkerFailed(f"the worker did not {what} within {seconds:g} s")
        try:
            message, received, _, _ = socket.recv_fds(self._channel, MAX_REPLY, 1)
        except OSError as exc:
            raise WorkerFailed(f"the worker cannot be reached ({exc.strerror or exc})") from None
        if not message:
            for fd in received:
                os.close(fd)
            raise WorkerFailed(f"the worker ended (exit status {self.process.poll()})")
        try:
            reply = json.loads(message)
        except ValueError:
            reply = None
        if not isinstance(reply, dict):
            for fd in received:
                os.close(fd)
            raise WorkerFailed("the worker answered nonsense")
        return reply, received

    def stop(self) -> None:
        """Kill the worker (stopped or not) and collect it; running gradings go on."""
        self._channel.close()
        try:
            self.process.send_signal(signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()


class ForkServer:
    """A server, replaced whenever it fails: started at once, its imports made once per server. By
    default the batch's grading worker (TensorFlow imported)."""

    def __init__(self, ready_seconds: float = READY_SECONDS, fork_seconds: float = FORK_SECONDS,
                 module: str = GRADING_WORKER, environment: dict | None = None):
        self.ready_seconds = ready_seconds
        self.fork_seconds = fork_seconds
        self.module = module
        self.environment = environment
        self.replaced = 0
        self.worker: Worker | None = Worker(module, environment)

    def fork(self, descriptors: list[int], request: dict) -> tuple[int, int]:
        """Fork once: (pid, pidfd). A server that fails is killed, the error raised, and the next
        call starts a new one."""
        if self.worker is None:
            self.worker = Worker(self.module, self.environment)
        try:
            return self.worker.fork(descriptors, request, self.ready_seconds, self.fork_seconds)
        except WorkerFailed:
            self.worker.stop()
            self.worker = None
            self.replaced += 1
            raise

    def close(self) -> None:
        if self.worker is not None:
            self.worker.stop()
            self.worker = None
