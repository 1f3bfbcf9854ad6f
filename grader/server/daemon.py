"""The grading server's process: ``python -I -m grader.server SOCKET IDENTITY IDLE_SECONDS BACKEND READY_FD``.

It leaves its launcher at once (so it is no command's child), listens on ``SOCKET``, says ready on
``READY_FD``, and serves until it has been idle for ``IDLE_SECONDS``, is told to stop, or learns
that it was started from another installation than a client's (``IDENTITY``). It holds, for each
backend it was asked for, the batch's warm worker (``grader.workers.Workers``:
TensorFlow and Keras imported once, a confined child forked per grading), and this process's
judge server (``grader.judging.client``); ``BACKEND``'s worker starts importing at once.

One thread does everything: it accepts connections, refuses every one whose peer is not of the
server's own user before reading a byte, reads the request, and moves each grading on through its
descriptors, as ``grade batch`` does: a ``Grading`` with the worker as its runner, exactly the
grading a cold ``grade`` makes with a fresh process. Every process it starts is started by that
thread, which lives as long as the server: a worker dies with the thread that started it. A client
that goes away ends its grading. The server keeps no state of a grading once it has answered.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import signal
import socket
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path

from . import wire

MAX_JOBS = 8  # gradings at once; a client beyond them is told the server is busy
REQUEST_SECONDS = 10.0  # for a connected client to send its request
ANSWER_SECONDS = 30.0  # for a client to take an answer
MAX_PATH = 4096


class Stopped(Exception):
    """SIGTERM or SIGINT: leave as from ``grade server stop``."""


def _stopped(_signum, _frame):
    raise Stopped()


class Job:
    """One grade request: its connection and its gradings (one, or one per backend with ``all_backends``)."""

    def __init__(self, server: "Server", conn: socket.socket, exercise_id: str, submission: str, settings,
                 all_backends: bool):
        from .. import portability

        self.server, self.conn = server, conn
        self.exercise_id, self.submission, self.settings = exercise_id, submission, settings
        self.all_backends = all_backends
        if all_backends:
            self.names, self.shared = portability.plan(settings)
        else:
            self.names, self.shared = [settings.backend], settings
        self.verdicts: dict = {}
        self.runs: dict = {}
        self.grading = None
        self.started = time.monotonic()
        self._start_next()

    def _start_next(self) -> None:
        from ..api import Grading

        name = self.names[len(self.verdicts)]
        settings = replace(self.shared, backend=name) if self.all_backends else self.shared
        try:
            runner = self.server.workers(name)
        except Exception as exc:  # noqa: BLE001 - the grader's own failure: Grading makes it an error verdict
            problem = (f"The submission could not be graded: the grader could not start the grading process "
                       f"({type(exc).__name__}: {str(exc)[:300]}).")
            self.grading = Grading(self.exercise_id, Path(self.submission), settings, refusal=problem)
            return
        self.grading = Grading(self.exercise_id, Path(self.submission), settings, runner=runner)

    def ready(self) -> bool:
        return self.grading.ready() or self.grading.sentinel is None

    def step(self) -> bool:
        """Move the grading on if it can; True once the client has its answer (or is gone)."""
        if not self.grading.advance():
            return False
        name = self.names[len(self.verdicts)]
        self.verdicts[name] = self.grading.finish()
        self.runs[name] = self.grading.run
        if len(self.verdicts) < len(self.names):
            self._start_next()
            return False
        self.answer(self._result())
        return True

    def _result(self) -> dict:
        from ..verdict import to_record

        if not self.all_backends:
            return {"ok": True, "verdict": to_record(self.verdicts[self.names[0]])}
        from .. import portability

        comparison = portability.comparison(self.names, self.verdicts, self.runs, self.settings)
        return {"ok": True, "comparison": {
            "reference": comparison.reference,
            "verdicts": {name: to_record(v) for name, v in comparison.verdicts.items()},
            "differences": [d.to_json() for d in comparison.differences],
            "skipped": comparison.skipped}}

    def answer(self, message: dict) -> None:
        try:
            self.conn.settimeout(ANSWER_SECONDS)
            wire.send(self.conn, message)
        except OSError:
            pass  # the client is gone: nobody waits for this grading
        finally:
            self.conn.close()

    def client_gone(self) -> bool:
        """Whether the client closed its end (or sent more than its one request)."""
        try:
            self.conn.settimeout(0)
            self.conn.recv(1, socket.MSG_PEEK)
        except (BlockingIOError, InterruptedError):
            return False
        except OSError:
            return True
        return True  # closed (b""), or it sent more than its one request

    def cancel(self) -> None:
        if self.grading is not None:
            self.grading.close()
        self.conn.close()


class Server:
    def __init__(self, path: Path, identity: str, idle: float, backend: str):
        self.path, self.lock = path, path.with_suffix(".lock")
        self.identity, self.idle, self.backend = identity, idle, backend
        self.started, self.started_clock = time.time(), time.monotonic()
        self.last_activity = time.monotonic()
        self.jobs: list[Job] = []
        self._workers: dict = {}
        self.graded = 0
        self.refused = 0
        self.listener: socket.socket | None = None
        self.inode = None
        self.stopping = False  # told to stop: end every grading and leave
        self.leaving = False  # stale: accept nothing more, leave once the gradings end

    # ------------------------------------------------------------------ the socket
    def bind(self) -> None:
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        mask = os.umask(0o177)
        try:
            listener.bind(str(self.path))
        except OSError:
            listener.close()
            raise
        finally:
            os.umask(mask)
        os.chmod(self.path, 0o600)
        info = os.stat(self.path)
        self.inode = (info.st_dev, info.st_ino)
        listener.listen(16)
        self.listener = listener

    def release(self) -> None:
        """Remove the socket's name (if it is still this server's) and stop listening. The name goes
        first, under the lock a starting client holds, so a new server never loses its own."""
        if self.listener is None:
            return
        with open(self.lock, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                info = os.stat(self.path)
                if (info.st_dev, info.st_ino) == self.inode:
                    os.unlink(self.path)
            except FileNotFoundError:
                pass
        self.listener.close()
        self.listener = None

    # ------------------------------------------------------------------ the workers
    def workers(self, backend: str):
        from ..workers import Workers

        if backend not in self._workers:
            self._workers[backend] = Workers(backend=backend)
        return self._workers[backend]

    # ------------------------------------------------------------------ serving
    def serve(self) -> None:
        try:
            while not self.stopping:
                if self.leaving and not self.jobs:
                    log("left: started from another installation than a client's")
                    return
                if not self.jobs and time.monotonic() - self.last_activity >= self.idle:
                    log(f"idle for {self.idle:g} s: leaving")
                    return
                self._wait()
                for job in list(self.jobs):
                    if job.client_gone():
                        job.cancel()
                        self._done(job)
                    elif job.ready():
                        self._step(job)
        except Stopped:
            log("stopped by a signal")
        finally:
            self.shutdown()

    def _wait(self) -> None:
        poller = select.poll()
        if self.listener is not None and not self.leaving:
            poller.register(self.listener, select.POLLIN)
        looks = []
        for job in self.jobs:
            poller.register(job.conn, select.POLLIN)
            if job.grading.sentinel is not None:
                poller.register(job.grading.sentinel, select.POLLIN)
            looks.append(job.grading.next_look())
        seconds = min(looks) if looks else max(0.0, self.idle - (time.monotonic() - self.last_activity))
        events = poller.poll(int(min(seconds, 60.0) * 1000) + 10)
        if self.listener is not None and any(fd == self.listener.fileno() for fd, _ in events):
            self._accept()

    def _step(self, job: Job) -> None:
        try:
            finished = job.step()
        except Exception as exc:  # noqa: BLE001 - the server's own fault: this grading's error, not the server's end
            log(f"grading {job.submission} failed in the server:\n{traceback.format_exc()}")
            job.grading.close()
            job.answer({"ok": False, "error": f"the grading server failed ({type(exc).__name__}: {str(exc)[:300]})"})
            finished = True
        if finished:
            self.graded += 1
            log(f"graded {job.submission} ({job.exercise_id}, {', '.join(job.names)}): "
                f"{time.monotonic() - job.started:.2f} s")
            self._done(job)

    def _done(self, job: Job) -> None:
        if job in self.jobs:
            self.jobs.remove(job)
        self.last_activity = time.monotonic()

    def _accept(self) -> None:
        try:
            conn, _ = self.listener.accept()
        except OSError:
            return
        try:
            _, uid = wire.peer(conn)
        except OSError:
            uid = None
        if uid != os.getuid():  # another user's process: not a byte read, not a byte answered
            self.refused += 1
            conn.close()
            return
        self.last_activity = time.monotonic()
        try:
            request = wire.receive(conn, wire.MAX_REQUEST, REQUEST_SECONDS)
        except wire.WireError:
            conn.close()
            return
        try:
            self._dispatch(conn, request)
        except Exception as exc:  # noqa: BLE001 - one bad request, answered; the server goes on
            log(f"a request failed in the server:\n{traceback.format_exc()}")
            _answer(conn, {"ok": False, "error": f"the grading server failed ({type(exc).__name__}: {str(exc)[:300]})"})

    def _dispatch(self, conn: socket.socket, request: dict) -> None:
        op = request.get("op")
        if op == "status":
            _answer(conn, {"ok": True, "status": self.status()})
        elif op == "stop":
            _answer(conn, {"ok": True, "pid": os.getpid()})
            log("told to stop")
            self.stopping = True
        elif op == "grade":
            if request.get("protocol") != wire_protocol() or request.get("identity") != self.identity:
                self.release()  # the name is free for the server the client starts next
                self.leaving = True
                _answer(conn, {"ok": False, "stale": True})
                return
            try:
                exercise_id, submission, settings, all_backends = read_grade_request(request)
            except ValueError as exc:
                _answer(conn, {"ok": False, "error": f"a malformed request ({exc})"})
                return
            if len(self.jobs) >= MAX_JOBS:
                _answer(conn, {"ok": False, "error": f"the grading server is busy with {MAX_JOBS} gradings"})
                return
            try:
                conn.settimeout(ANSWER_SECONDS)
                wire.send(conn, {"accepted": True})
            except OSError:
                conn.close()
                return
            self.jobs.append(Job(self, conn, exercise_id, submission, settings, all_backends))
        else:
            _answer(conn, {"ok": False, "error": f"no such request: {str(op)[:40]!r}"})

    def status(self) -> dict:
        from ..judging.client import shared_judges_pid

        roles = {os.getpid(): "server"}
        for name, workers in self._workers.items():
            if workers.pid is not None:
                roles[workers.pid] = f"{name} worker"
        judge = shared_judges_pid()
        if judge is not None:
            roles[judge] = "judge server"
        memory = [{"pid": pid, "role": roles.get(pid, "grading"), "rss_kb": rss}
                  for pid, rss in process_tree(os.getpid())]
        idle_for = None if self.jobs else time.monotonic() - self.last_activity
        return {"pid": os.getpid(), "started": self.started, "uptime": time.monotonic() - self.started_clock,
                "backends": {name: w.pid for name, w in self._workers.items()}, "idle_timeout": self.idle,
                "idle_for": idle_for, "socket": str(self.path), "identity": self.identity,
                "protocol": wire_protocol(), "python": sys.version.split()[0], "graded": self.graded,
                "grading": len(self.jobs), "refused": self.refused, "memory": memory,
                "rss_kb": sum(entry["rss_kb"] for entry in memory)}

    def shutdown(self) -> None:
        from ..judging.client import close_shared_judges

        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # leaving already: a second signal must not cut it short
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            self.release()
        except OSError:
            pass
        for job in self.jobs:
            job.cancel()
        self.jobs = []
        for workers in self._workers.values():
            workers.close()
        self._workers = {}
        close_shared_judges()


def wire_protocol() -> int:
    from .place import PROTOCOL

    return PROTOCOL


def read_grade_request(request: dict):
    """(exercise id, submission path, Settings, all_backends) of a grade request; ValueError if malformed."""
    from .. import backends, exercises
    from ..settings import Settings

    exercise_id, submission = request.get("exercise"), request.get("submission")
    if not isinstance(exercise_id, str) or exercise_id not in exercises.EXERCISES:
        raise ValueError("no such exercise")
    if not isinstance(submission, str) or not os.path.isabs(submission) or "\0" in submission \
            or len(submission) > MAX_PATH:
        raise ValueError("the submission is not an absolute path")
    given = request.get("settings")
    if not isinstance(given, dict):
        raise ValueError("no settings")
    seed, timeout, memory, backend = (given.get(k) for k in ("seed", "timeout", "memory_mb", "backend"))
    if seed is not None and not (_whole(seed) and seed >= 0):
        raise ValueError("the seed is not a whole number of 0 or more")
    if not (isinstance(timeout, float) and 1 <= timeout < float("inf")):
        raise ValueError("the time limit is not a number of seconds of at least 1")
    if not (_whole(memory) and memory >= 512):
        raise ValueError("the memory limit is not a whole number of MiB of at least 512")
    if backend not in backends.NAMES:
        raise ValueError("no such backend")
    backends.check(backend)
    if not isinstance(request.get("all_backends"), bool):
        raise ValueError("all_backends is not true or false")
    return exercise_id, submission, Settings(seed=seed, timeout=timeout, memory_mb=memory, backend=backend), \
        request["all_backends"]


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _answer(conn: socket.socket, message: dict) -> None:
    try:
        conn.settimeout(ANSWER_SECONDS)
        wire.send(conn, message)
    except OSError:
        pass
    finally:
        conn.close()


def process_tree(root: int) -> list[tuple[int, int]]:
    """(pid, resident KiB) of ``root`` and every process below it, read from /proc."""
    parents = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            if fields[0] != b"Z":  # an ended process its parent has not collected yet holds no memory
                parents[int(entry)] = int(fields[1])
        except (OSError, IndexError, ValueError):
            continue
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(child for child, parent in parents.items() if parent == pid)
    return [(pid, resident_kb(pid)) for pid in sorted(tree)]


def resident_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as handle:
            for line in handle:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return 0


def log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} [{os.getpid()}] {message}", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    path, identity, idle, backend, ready_fd = argv
    ready_fd = int(ready_fd)
    if os.fork() > 0:  # the launcher leaves at once: the server is no command's child
        os._exit(0)
    signal.signal(signal.SIGTERM, _stopped)
    signal.signal(signal.SIGINT, _stopped)
    server = Server(Path(path), identity, float(idle), backend)
    try:
        server.bind()
    except OSError as exc:
        _ready(ready_fd, {"error": f"it cannot listen on {path} ({exc.strerror or exc})"})
        return 1
    try:
        server.workers(backend)  # TensorFlow's import starts now, while the first request comes
    except Exception as exc:  # noqa: BLE001 - the first grading's Job says so again, as its error verdict
        log(f"the {backend} worker could not start: {exc}")
    log(f"serving on {path} (idle timeout {float(idle):g} s)")
    _ready(ready_fd, {"ready": True, "pid": os.getpid()})
    server.serve()
    log("ended")
    return 0


def _ready(fd: int, message: dict) -> None:
    try:
        os.write(fd, (json.dumps(message) + "\n").encode())
    except OSError:
        pass
    finally:
        os.close(fd)
