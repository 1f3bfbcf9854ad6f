"""The server's side of the grader's fork servers (the batch worker, the judge server).

A server holds one end of an anonymous socketpair the grader made; it says ``ready``, then forks
once per request and answers with a pidfd of the fork, through which the grader waits for it and
ends it. It keeps none of a fork's descriptors and never waits on a fork. ``forkserver`` is the
grader's side.
"""

from __future__ import annotations

import gc
import json
import os
import signal
import socket
import sys

MAX_REQUEST = 1 << 16


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
    never returns; any other with an error. The server keeps none of a fork's descriptors.

    What the server imported is moved out of the garbage collector's reach first (``gc.freeze``): a
    fork's collections then walk only the objects it made itself, not the libraries' hundreds of
    thousands (about a third of a warm TensorFlow grading's child otherwise), and its pages stay shared.
    No collection comes first: the imports leave next to no garbage (none in the batch worker, a few
    dozen objects in the judge server), and a full collection would walk every one of those objects
    once more on the way to ready (0.15 s in the worker)."""
    gc.freeze()
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


def _reap_ended() -> None:
    """Collect the forks that have ended (the grader watches them through their pidfds)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
