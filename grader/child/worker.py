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
    channel = start_server()
    if channel is None:
        return
    from . import preload  # noqa: F401

    serve_forever(channel, DESCRIPTORS, _environment_of, _grade)


def start_server() -> "socket.socket | None":
    """The server's channel (``argv[1]``), tied to the grader's life; None if the grader is gone."""
    from . import kernel

    channel = socket.socket(fileno=int(sys.argv[1]))
    kernel.prctl(kernel.PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != int(sys.argv[2]):  # the grader is already gone
        return None
    os.chdir("/")
    return channel


def serve_forever(channel, expected: int, validate, body) -> None:
    """Say ``ready``, then fork once per request until the grader goes: a request of ``expected``
    descriptors whose JSON ``validate(request)`` accepts (it returns the fork's argument or raises
    ValueError) is answered with a pidfd of a fork running ``body(descriptors, argument)``, which
    never returns; any other with an error. The server keeps none of a fork's descriptors."""
    channel.sendall(b'{"ready": true}')
    while True:
        try:
            message, descriptors, _, _ = socket.recv_fds(channel, MAX_REQUEST, expected)
        except OSError:
            return
        if not message:
            return  # the grader is gone
        _reap_ended()
        try:
            answer, pidfd = _serve(channel, message, descriptors, expected, validate, body)
        finally:
            for fd in descriptors:
                os.close(fd)
        try:
            socket.send_fds(channel, [json.dumps(answer).encode()], [pidfd] if pidfd is not None else [])
        finally:
            if pidfd is not None:
                os.close(pidfd)


def _serve(channel, message: bytes, descriptors: list[int], expected: int, validate, body):
    """Fork once; ({"pid": ...}, pidfd) or ({"error": ...}, None)."""
    try:
        if len(descriptors) != expected:
            raise ValueError(f"a request needs {expected} descriptors")
        argument = validate(json.loads(message))
    except (ValueError, KeyError, TypeError) as exc:
        return {"error": f"malformed request ({exc})"}, None
    pid = os.fork()
    if pid == 0:
        try:
            channel.close()
            body(descriptors, argument)
        finally:
            os._exit(70)
    return {"pid": pid}, os.pidfd_open(pid)


def _environment_of(request) -> dict:
    environment = request["environment"] if isinstance(request, dict) else None
    if not isinstance(environment, dict):
        raise ValueError("a request needs an environment")
    return environment


def _grade(descriptors: list[int], environment: dict) -> None:
    from . import forked

    forked.run(descriptors, environment)


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
