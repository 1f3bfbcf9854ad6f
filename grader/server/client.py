"""The command's side of the grading server: reach this user's server (starting it when there is
none, or when the one there was started from another installation) and grade through it.

A request that the server never took on (it was leaving, or its socket was stale) is made again to
a new server; a server that goes away after it took a grading on costs that grading ``Stopped``,
and the next request starts a new one. The server's answer is checked for form before it becomes a
verdict. Nothing here imports the grading machinery: the command stays light.
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import stat
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from . import place, wire
from .place import Unavailable

START_SECONDS = 60.0  # for a new server to listen (its worker's import goes on after)
ACCEPT_SECONDS = 660.0  # for a server to take a grading on: it may be waiting for a worker's import
# beyond the submission's own time limit, for an answer: the grading process's start-up allowance
# (600 s), the checks' limit and the judge's grace (75 s), with room to spare
ANSWER_MARGIN = 900.0
STOP_SECONDS = 30.0
ATTEMPTS = 3


class Stopped(Exception):
    """The server went away while grading; the message names the submission."""


class Failed(Exception):
    """The server answered that it could not grade, or answered nonsense; the message says which."""


class Client:
    """This user's grading server for this installation, reached on demand."""

    def __init__(self, environ=os.environ):
        if not hasattr(socket, "SO_PEERCRED"):
            raise Unavailable("this system cannot tell who is at the other end of a socket (SO_PEERCRED)")
        self.place = place.find(environ)
        self.identity = place.identity(environ)
        self.idle = place.idle_seconds(environ)
        self.environment = place.server_environment(environ)

    # ------------------------------------------------------------------ grading
    def grade(self, exercise_id: str, submission: Path, settings):
        """The Verdict of ``submission``, graded by the server as a cold ``grade`` grades it."""
        from ..verdict import from_record

        answer = self._grade(exercise_id, submission, settings, all_backends=False)
        try:
            return from_record(answer.get("verdict"))
        except ValueError as exc:
            raise Failed(f"the grading server answered nonsense ({exc})") from None

    def grade_all(self, exercise_id: str, submission: Path, settings):
        """``--all-backends`` through the server: the Comparison ``portability.grade_all`` gives."""
        from ..portability import Comparison, Difference
        from ..verdict import from_record

        answer = self._grade(exercise_id, submission, settings, all_backends=True)
        data = answer.get("comparison")
        try:
            verdicts = {str(name): from_record(record) for name, record in data["verdicts"].items()}
            differences = [Difference(**{k: v for k, v in d.items()}) for d in data["differences"]]
            comparison = Comparison(str(data["reference"]), verdicts, differences, dict(data["skipped"]))
            if comparison.reference not in verdicts:
                raise ValueError("no verdict of the reference backend")
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise Failed(f"the grading server answered nonsense ({exc})") from None
        return comparison

    def _grade(self, exercise_id: str, submission: Path, settings, all_backends: bool) -> dict:
        from .. import backends

        request = {"op": "grade", "protocol": place.PROTOCOL, "identity": self.identity, "exercise": exercise_id,
                   "submission": str(submission), "all_backends": all_backends,
                   "settings": {"seed": settings.seed, "timeout": float(settings.timeout),
                                "memory_mb": int(settings.memory_mb), "backend": settings.backend}}
        gradings = len(backends.available()) if all_backends else 1
        for _ in range(ATTEMPTS):
            sock = self._connect_or_start(settings.backend)
            try:
                try:
                    wire.send(sock, request)
                    first = wire.receive(sock, wire.MAX_ANSWER, ACCEPT_SECONDS)
                except (wire.WireError, OSError):
                    continue  # it went away before taking the grading on (idle, replaced): another one
                if first.get("stale"):
                    continue  # started from another installation: it has left, and the next is ours
                if first.get("accepted") is not True:
                    raise Failed(str(first.get("error") or "the grading server refused the grading")[:500])
                try:
                    answer = wire.receive(sock, wire.MAX_ANSWER, (settings.timeout + ANSWER_MARGIN) * gradings)
                except wire.WireError:
                    raise Stopped(f"the grading server stopped while grading {submission}; grade again") from None
            finally:
                sock.close()
            if answer.get("ok") is not True:
                raise Failed(str(answer.get("error") or "the grading server could not grade")[:500])
            return answer
        raise Unavailable(f"no grading server took the grading after {ATTEMPTS} attempts")

    # ------------------------------------------------------------------ status, stop
    def status(self) -> dict | None:
        """The running server's status (``daemon.Server.status``), or None if none runs."""
        sock = self._connect()
        if sock is None:
            return None
        try:
            wire.send(sock, {"op": "status"})
            answer = wire.receive(sock, wire.MAX_ANSWER, ACCEPT_SECONDS)
        except (wire.WireError, OSError) as exc:
            raise Failed(f"the grading server did not answer ({exc})") from None
        finally:
            sock.close()
        if answer.get("ok") is not True or not isinstance(answer.get("status"), dict):
            raise Failed("the grading server answered nonsense")
        return answer["status"]

    def stop(self) -> tuple[int | None, bool]:
        """End the running server and its workers: (its pid or None, whether a stale socket was removed)."""
        sock = self._connect()
        if sock is None:
            with self._locked():
                return None, self._remove_stale()
        try:
            server_pid, _ = wire.peer(sock)
            wire.send(sock, {"op": "stop"})
            wire.receive(sock, wire.MAX_ANSWER, STOP_SECONDS)
        except (wire.WireError, OSError):
            pass  # it ended anyway, or is stuck: it is waited for, then killed
        finally:
            sock.close()
        end_process(server_pid, STOP_SECONDS)
        return server_pid, False

    # ------------------------------------------------------------------ reaching it
    def _connect(self) -> socket.socket | None:
        """A connection to the server on the socket, or None when no server is there."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(str(self.place.socket))
        except (FileNotFoundError, ConnectionRefusedError):
            sock.close()
            return None
        except OSError as exc:
            sock.close()
            raise Unavailable(f"its socket {self.place.socket} cannot be reached ({exc.strerror or exc})") from None
        _, uid = wire.peer(sock)
        if uid != os.getuid():
            sock.close()
            raise Unavailable(f"the process listening on {self.place.socket} is another user's (uid {uid})")
        return sock

    def _connect_or_start(self, backend: str) -> socket.socket:
        sock = self._connect()
        if sock is not None:
            return sock
        with self._locked():
            sock = self._connect()
            if sock is not None:
                return sock
            self._remove_stale()
            self._start(backend)
        sock = self._connect()
        if sock is None:
            raise Unavailable(f"the grading server it started is not listening on {self.place.socket}")
        return sock

    @contextmanager
    def _locked(self):
        import fcntl

        fd = os.open(self.place.lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _remove_stale(self) -> bool:
        """Remove a socket no server listens on (its server was killed); True if there was one."""
        path = self.place.socket
        try:
            info = os.lstat(path)
        except FileNotFoundError:
            return False
        if not stat.S_ISSOCK(info.st_mode) or info.st_uid != os.getuid():
            raise Unavailable(f"{path} is not a grading server's socket; remove it")
        os.unlink(path)
        return True

    def _start(self, backend: str) -> None:
        """Start a server (the lock is held) and wait until it listens."""
        ready_read, ready_write = os.pipe()
        # appending: a server that is leaving may still write its last lines to the log it shares with this one
        log = os.open(self.place.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC,
                      0o600)
        try:
            launcher = subprocess.Popen(
                [sys.executable, "-I", "-m", "grader.server", str(self.place.socket), self.identity, repr(self.idle),
                 backend, str(ready_write)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, pass_fds=(ready_write,), env=self.environment,
                cwd="/", start_new_session=True)
        except OSError as exc:
            os.close(ready_read)
            raise Unavailable(f"the grading server could not be started ({exc.strerror or exc})") from None
        finally:
            os.close(ready_write)
            os.close(log)
        try:
            launcher.wait(START_SECONDS)  # it leaves as soon as it has forked the server
            line = _read_line(ready_read, START_SECONDS)
        except subprocess.TimeoutExpired:
            launcher.kill()
            launcher.wait()
            line = b""
        finally:
            os.close(ready_read)
        try:
            said = json.loads(line) if line.strip() else {}
        except ValueError:
            said = {}
        if said.get("ready") is not True:
            why = said.get("error") or f"it said nothing; its log is {self.place.log}"
            raise Unavailable(f"the grading server could not start: {str(why)[:300]}")


def _read_line(fd: int, seconds: float) -> bytes:
    deadline = time.monotonic() + seconds
    data = b""
    while b"\n" not in data and len(data) < 4096:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            break
        block = os.read(fd, 4096)
        if not block:
            break
        data += block
    return data.split(b"\n", 1)[0]


def end_process(pid: int, seconds: float) -> None:
    """Wait for ``pid`` to end, for ``seconds``, then kill it (a zombie has ended)."""
    try:
        pidfd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if not poller.poll(int(seconds * 1000)):
            try:
                signal.pidfd_send_signal(pidfd, signal.SIGKILL)
            except ProcessLookupError:
                pass
            poller.poll(int(seconds * 1000))
    finally:
        os.close(pidfd)
