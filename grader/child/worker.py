"""The batch worker: a fork server of this package's own, with TensorFlow imported once.

``python -I -m grader.child.worker SOCKET_FD GRADER_PID``: its only channel is one end of
an anonymous socketpair the grader created and it inherited; there is no named
socket, no pipe of a helper and no resource tracker for a graded child to
find. It imports TensorFlow and the probes (``preload``), says ``ready``, then
serves one request at a time: a request carries the six descriptors of one
grading (received with SCM_RIGHTS) and its environment; the worker forks, the
fork closes the socket and every descriptor it was not given before anything
else (``forked``), and the worker answers with a pidfd of the fork, through
which the grader waits for it and ends it. The worker keeps none of a
grading's descriptors, reads no job and no secret, and never waits on a fork:
a grading cannot stop it nor make it wait. It dies with the grader.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys

MAX_REQUEST = 1 << 16
DESCRIPTORS = 6


def main() -> None:
    from . import kernel

    channel = socket.socket(fileno=int(sys.argv[1]))
    kernel.prctl(kernel.PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != int(sys.argv[2]):  # the grader is already gone
        return
    os.chdir("/")
    from . import preload  # noqa: F401

    channel.sendall(b'{"ready": true}')
    while True:
        try:
            message, descriptors, _, _ = socket.recv_fds(channel, MAX_REQUEST, DESCRIPTORS)
        except OSError:
            return
        if not message:
            return  # the grader is gone
        _reap_ended()
        try:
            answer, pidfd = serve(channel, message, descriptors)
        finally:
            for fd in descriptors:
                os.close(fd)
        try:
            socket.send_fds(channel, [json.dumps(answer).encode()], [pidfd] if pidfd is not None else [])
        finally:
            if pidfd is not None:
                os.close(pidfd)


def serve(channel, message: bytes, descriptors: list[int]):
    """Fork one grading; ({"pid": ...}, pidfd) or ({"error": ...}, None)."""
    try:
        request = json.loads(message)
        environment = request["environment"]
        if len(descriptors) != DESCRIPTORS or not isinstance(environment, dict):
            raise ValueError("a request needs six descriptors and an environment")
    except (ValueError, KeyError, TypeError) as exc:
        return {"error": f"malformed request ({exc})"}, None
    pid = os.fork()
    if pid == 0:
        try:
            channel.close()
            from . import forked

            forked.run(descriptors, environment)
        finally:
            os._exit(70)
    return {"pid": pid}, os.pidfd_open(pid)


def _reap_ended() -> None:
    """Collect the forks that have ended (the grader watches them through their pidfds)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


if __name__ == "__main__":
    main()
