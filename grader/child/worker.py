"""The batch worker: a fork server of this package's own, with TensorFlow imported once.

``python -I -m grader.child.worker SOCKET_FD GRADER_PID``: its only channel is one end of
an anonymous socketpair the grader created and it inherited; there is no named
socket, no pipe of a helper and no resource tracker for a graded child to
find. It imports TensorFlow and the probes (``preload``), says ``ready``, then
serves one request at a time: a request carries the six descriptors of one
grading (received with SCM_RIGHTS) and its environment; the worker forks (the loop is
``grader.sandbox.forkloop``'s), the
fork closes the socket and every descriptor it was not given before anything
else (``forked``), and the worker answers with a pidfd of the fork, through
which the grader waits for it and ends it. The worker keeps none of a
grading's descriptors, reads no job and no secret, and never waits on a fork:
a grading cannot stop it nor make it wait. It dies with the grader.
"""

from __future__ import annotations

from ..sandbox.forkloop import serve_forever, start_server

DESCRIPTORS = 6


def main() -> None:
    channel = start_server()
    if channel is None:
        return
    from . import preload  # noqa: F401

    serve_forever(channel, DESCRIPTORS, _environment_of, _grade)


def _environment_of(request) -> dict:
    environment = request["environment"] if isinstance(request, dict) else None
    if not isinstance(environment, dict):
        raise ValueError("a request needs an environment")
    return environment


def _grade(descriptors: list[int], environment: dict) -> None:
    from . import forked

    forked.run(descriptors, environment)


if __name__ == "__main__":
    main()
