"""Runs a submission in a contained child process with a wall-clock and a memory limit.

The child gets a scratch copy of the submission, the public part of its job on
stdin, a private pipe for evidence and a second pipe, the control channel, on
which the parent answers the child's report of the layer's variables with the
secret part of the job (``respond``). Evidence is parsed as it arrives. The
child's stdout and stderr are captured and capped; how it ended arrives on a
status pipe from the keeper (``grader.sandbox.reaper``), is recorded, and is
never trusted as a result. At the time limit the keeper is asked to end the
grading (every process it started included), then killed.

Two clocks bound a grading. The submission's time limit starts when the
grading process reports its runtime ready (the interpreter started, the
backend imported, the confinement applied: the grader's own code, before any
line of the submission runs), so a limit of a few seconds means the same on a
loaded machine as on an idle one. Until then a start-up allowance of the
grader's own applies (``STARTUP_SECONDS``); running out of it is the
machine's failure, never the submission's. Evidence the parent refuses ends
the grading at once: nothing the grading process does after it is read.

``Child`` starts a fresh interpreter for one grading; the warm worker (``grader.workers``) forks
the same keeper from a worker that has TensorFlow imported. Both share
``GradingProcess``: the pipes, the readers and the waiting.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from ..protocol.limits import MAX_OUTPUT_BYTES
from .evidence import ChildRun, RecordParser, read_records
from .pipes import read_capped, readable, write_all

MAX_FILE_BYTES = 256 * 1024 * 1024  # any one file the submission writes
MAX_WRITE_BYTES = 256 * 1024 * 1024  # everything it writes, where a private tmpfs can hold its scratch folder
MAX_PROCESSES = 32  # processes and threads of one grading (TensorFlow's own, about six, included)
LAUNCH_ATTEMPTS = 2  # a runner whose start failed (a batch worker that died) is asked once more
STOP_GRACE = 10.0  # seconds the keeper gets to end a grading it was asked to end, before it is killed
STARTUP_SECONDS = 600.0  # the grading process's own start (import, confinement), before the submission's clock
WAKE_SECONDS = 0.25  # a waiter looks again this often: the submission's clock may start while it waits
MAX_STATUS_BYTES = 4096

CHILD_ENV = {
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "TF_ENABLE_ONEDNN_OPTS": "0",
    "CUDA_VISIBLE_DEVICES": "-1",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OMP_NUM_THREADS": "1",
}
PASSED_THROUGH = ("LANG", "LC_ALL", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


class LaunchFailed(Exception):
    """A runner could not start the child; starting again, with new pipes, may work."""


def limits(timeout: float, memory_mb: int, private=(), reads: dict | None = None, compiled: dict | None = None) -> dict:
    """The limits a child applies to itself and everything it starts. ``reads`` is what the grading
    process may read of the grader's installation, as the grader declares it
    (``grader.exercises.reads.policy``): the files it is granted, and the folders closed to it even
    where they lie inside folders it reads (the package, the project around it); ``private`` are more
    folders closed to it (the folders submissions come from). Without ``reads``, the whole package.
    ``compiled`` is the folder of compiled operations it may read (``grader.compiled``), and write
    where ``compiled["write"]``."""
    reads = reads if reads is not None else {"grant": [], "closed": [_package_folder()]}
    closed = [os.path.realpath(str(path)) for path in reads.get("closed", ())]
    private = [os.path.realpath(str(path)) for path in private]
    # of the submissions' folders only the outermost: a class's folder stands for its students' (whose
    # names the child would see); every closed path stays, since one may lie in a Python folder that
    # lies in another (the distribution's metadata in a virtual environment inside a clone)
    private = [path for path in private if not any(path.startswith(other.rstrip(os.sep) + os.sep)
                                                   for other in [*private, *closed] if other != path)]
    hidden = list(dict.fromkeys([*closed, *private]))
    return {"timeout": float(timeout), "startup": STARTUP_SECONDS, "memory_mb": int(memory_mb),
            "file_bytes": MAX_FILE_BYTES, "write_bytes": MAX_WRITE_BYTES, "processes": MAX_PROCESSES,
            "hidden": hidden, "grant": [str(path) for path in reads.get("grant", ())],
            "compiled": None if compiled is None else {"folder": os.path.realpath(str(compiled["folder"])),
                                                      "write": compiled["write"] is True}}


def _package_folder() -> str:
    return str(Path(__file__).resolve().parent.parent)


def _new_group(memory_mb: int):
    """(a control group for one grading, None) where the grader can make one, else (None, why not)."""
    from . import cgroups

    hierarchy, why = cgroups.hierarchy()
    if hierarchy is None:
        return None, why
    try:
        return hierarchy.new_group(int(memory_mb) * 1024 * 1024, MAX_PROCESSES), None
    except OSError as exc:
        return None, f"the grader could not make one ({exc.strerror or exc})"


class GradingProcess:
    """One grading's child, started at once and waited for when its evidence is needed.

    A subclass starts the keeper in ``_launch(descriptors, environment)``, given the child's ends of
    its pipes (stdin, stdout, stderr, evidence, control, status), and returns a pidfd of it;
    ``_reap()`` collects it when it is the parent's own child."""

    def __init__(self, job: dict, submission_source: str, timeout: float, memory_mb: int, respond=None):
        """``respond(record)`` is called for each evidence record as it arrives; bytes it returns
        are written to the child's control channel (once), which is then closed."""
        self._scratch, job = make_scratch(job, submission_source)
        job = dict(job, limits=limits(timeout, memory_mb, job.get("private", ()), job.get("reads"), job.get("compiled")))
        self._group = None
        try:
            self._group, job["limits"]["cgroup_refused"] = _new_group(memory_mb)
        except BaseException:
            shutil.rmtree(self._scratch, ignore_errors=True)
            raise
        if self._group is not None:
            job["limits"].update(cgroups=self._group.procs, cgroup=self._group.describe())
        self._timeout = timeout
        self._killed = False
        self._result: ChildRun | None = None
        self._pidfd: int | None = None
        self._ends: list[int] = []  # the parent's ends, closed by wait()
        try:
            for attempt in range(1, LAUNCH_ATTEMPTS + 1):
                try:
                    self._start(job, respond)
                    break
                except LaunchFailed:
                    if attempt == LAUNCH_ATTEMPTS:
                        raise
        except BaseException:
            self._abandon()
            raise

    def _start(self, job: dict, respond) -> None:
        pipes = {name: os.pipe() for name in ("stdin", "stdout", "stderr", "evidence", "control", "status")}
        ours = {"stdin": 1, "stdout": 0, "stderr": 0, "evidence": 0, "control": 1, "status": 0}
        theirs = [pipes[name][1 - ours[name]] for name in ("stdin", "stdout", "stderr", "evidence", "control",
                                                            "status")]
        try:
            self._started = time.perf_counter()
            self._pidfd = self._launch(theirs, dict(fresh_environment(), **child_environment(self._scratch)))
        except BaseException:
            for name, pair in pipes.items():  # a keeper started anyway reads no job and ends
                os.close(pair[ours[name]])
            raise
        finally:
            for fd in theirs:
                os.close(fd)
        for name, pair in pipes.items():
            self._ends.append(pair[ours[name]])
        self._status_fd = pipes["status"][0]
        control_write = pipes["control"][1]
        self._ends.remove(control_write)  # the control channel closes it
        self._control = ControlChannel(lambda data: write_all(control_write, data),
                                       lambda: os.close(control_write))
        self._parser = RecordParser(ChildRun(), respond, self._control)
        self._out: list[bytes] = []
        self._err: list[bytes] = []
        self._readers = [
            threading.Thread(target=read_records, args=(pipes["evidence"][0], self._parser), daemon=True),
            threading.Thread(target=read_capped, args=(pipes["stdout"][0], self._out, MAX_OUTPUT_BYTES),
                             daemon=True),
            threading.Thread(target=read_capped, args=(pipes["stderr"][0], self._err, MAX_OUTPUT_BYTES),
                             daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        for name in ("evidence", "stdout", "stderr"):  # each reader closes its own
            self._ends.remove(pipes[name][0])
        stdin = pipes["stdin"][1]
        try:
            write_all(stdin, json.dumps(job).encode("utf-8"))
        except OSError:
            pass  # the keeper is gone already: wait() tells how it ended
        finally:
            self._ends.remove(stdin)
            os.close(stdin)

    def _launch(self, descriptors: list[int], environment: dict) -> int:
        raise NotImplementedError

    def _reap(self) -> None:
        """Collect the keeper's exit when it is this process's own child."""

    def _returncode(self) -> int | None:
        """The keeper's own exit status, when known: used only if it sent no status."""
        return None

    @property
    def sentinel(self) -> int:
        """A descriptor that becomes readable when the keeper has ended."""
        return self._pidfd

    def ended(self) -> bool:
        return readable(self._pidfd, 0)

    def ready(self) -> bool:
        """Finished, out of time or untrusted (``wait`` then ends it at once)."""
        return self._result is not None or self.ended() or self.seconds_left() <= 0 or self.untrusted()

    def untrusted(self) -> bool:
        """Whether the parent refused the evidence: the grading has nothing more to give."""
        return self._parser.run.protocol_error is not None

    def seconds_left(self) -> float:
        """Until the current clock runs out: the start-up allowance, then the submission's limit."""
        if self._killed:
            return 0.0
        ready = self._parser.ready_at
        if ready is None:
            return max(0.0, STARTUP_SECONDS - (time.perf_counter() - self._started))
        return max(0.0, self._timeout - (time.perf_counter() - ready))

    def next_look(self) -> float:
        """How long a waiter may sleep before it must look at this grading again."""
        return min(self.seconds_left(), WAKE_SECONDS)

    def expire(self) -> None:
        """Run the grading's clock out now, without waiting: whoever waits for it ends it, and its
        verdict is the one of a time limit reached at this moment."""
        self._killed = True

    def kill(self) -> None:
        """End the grading now (the verdict, if anyone asks, is a timeout)."""
        self.expire()
        self.wait()

    def wait(self) -> ChildRun:
        """Wait for the child (ending it at the time limit) and return what it sent."""
        if self._result is not None:
            return self._result
        run = self._parser.run
        while not readable(self._pidfd, self.next_look()):
            if self.untrusted():  # refused: ended now, not at the time limit
                self._stop()
                break
            if self.seconds_left() <= 0:
                run.timed_out = True
                run.startup_timed_out = self._parser.ready_at is None and not self._killed
                self._stop()
                break
        self._reap()
        for reader in self._readers:
            reader.join(timeout=5)
        self._control.close()
        status = _read_status(self._status_fd)
        returncode = status_returncode(status.get("status")) if "status" in status else self._returncode()
        end_run(run, self._started, returncode, _text(self._out), _text(self._err))
        run.time_limit = float(self._timeout)
        if self._parser.ready_at is not None:
            run.student_seconds = time.perf_counter() - self._parser.ready_at
        if self._group is not None and self._group.out_of_memory():
            run.memory_exceeded = True  # the kernel ended a process of the grading: its group's memory was full
        self._parser.finish()
        self._abandon()
        self._result = run
        return run

    def _stop(self) -> None:
        """Ask the keeper to end the grading; kill it if it has not within STOP_GRACE."""
        for sig, grace in ((signal.SIGTERM, STOP_GRACE), (signal.SIGKILL, STOP_GRACE)):
            try:
                signal.pidfd_send_signal(self._pidfd, sig)
            except ProcessLookupError:
                return
            if readable(self._pidfd, grace):
                return

    def _abandon(self) -> None:
        """Close every descriptor and remove the scratch folder (the keeper, if any, is over or killed)."""
        if self._result is None and self._pidfd is not None and not self.ended():
            self._stop()
            self._reap()
        for fd in self._ends:
            try:
                os.close(fd)
            except OSError:
                pass
        self._ends = []
        if self._pidfd is not None:
            os.close(self._pidfd)
            self._pidfd = None
        if self._group is not None:
            self._group.remove()
            self._group = None
        shutil.rmtree(self._scratch, ignore_errors=True)


class Child(GradingProcess):
    """A grading in a fresh interpreter: ``python -I -m grader.child`` is the keeper."""

    def _launch(self, descriptors: list[int], environment: dict) -> int:
        stdin, stdout, stderr, evidence, control, status = descriptors
        self._proc = subprocess.Popen(
            [sys.executable, "-I", "-m", "grader.child", str(evidence), str(control), str(status)],
            stdin=stdin, stdout=stdout, stderr=stderr, pass_fds=(evidence, control, status),
            cwd=self._scratch, env=environment, start_new_session=True,
        )
        try:
            return os.pidfd_open(self._proc.pid)
        except BaseException:
            self._proc.kill()
            self._proc.wait()
            raise

    def _reap(self) -> None:
        self._proc.wait()

    def _returncode(self) -> int | None:
        return self._proc.returncode

    def _abandon(self) -> None:
        super()._abandon()
        proc = getattr(self, "_proc", None)
        if proc is not None and proc.returncode is None:
            proc.kill()
            proc.wait()


def fresh_environment() -> dict:
    """What a child's environment keeps of the grader's: the locale and OpenBLAS's CPU settings;
    the search path is the interpreter's folder and the system's, not the grader's own."""
    env = {k: os.environ[k] for k in PASSED_THROUGH if k in os.environ}
    env["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), "/usr/local/bin", "/usr/bin", "/bin"])
    return env


def _read_status(fd: int) -> dict:
    """The keeper's one status record: {"status": wait status or None, "ended": ...}, or {}."""
    os.set_blocking(fd, False)
    data = b""
    try:
        while len(data) <= MAX_STATUS_BYTES:
            block = os.read(fd, MAX_STATUS_BYTES)
            if not block:
                break
            data += block
    except (BlockingIOError, OSError):
        pass
    try:
        record = json.loads(data.decode("utf-8").strip() or "{}")
    except (UnicodeDecodeError, ValueError):
        return {}
    if not isinstance(record, dict):
        return {}
    status = record.get("status")
    if status is not None and (not isinstance(status, int) or isinstance(status, bool)):
        return {}
    return record


def status_returncode(status: int | None) -> int | None:
    """A wait status as subprocess's returncode: the exit code, or minus the signal number."""
    if status is None:
        return None
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return None


class ControlChannel:
    """The parent's end of the control channel: one message, written off the reader's thread
    (a child that does not read cannot stall the evidence), then closed."""

    def __init__(self, write, close):
        self._write = write
        self._close = close
        self._lock = threading.Lock()
        self._used = False
        self._closed = False

    def send(self, data: bytes) -> None:
        with self._lock:
            if self._used or self._closed:
                return
            self._used = True

        def deliver():
            try:
                self._write(data)
            except (BrokenPipeError, OSError, EOFError, ValueError):
                pass
            finally:
                self.close()

        threading.Thread(target=deliver, daemon=True).start()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        try:
            self._close()
        except (OSError, EOFError, ValueError):
            pass


def child_environment(scratch: str | None = None) -> dict:
    """Environment variables of a child: quiet TensorFlow, and every home or cache in its scratch folder."""
    env = dict(CHILD_ENV)
    if scratch is not None:
        for name in ("TMPDIR", "HOME", "KERAS_HOME", "XDG_CACHE_HOME", "MPLCONFIGDIR"):
            env[name] = scratch
    return env


def make_scratch(job: dict, submission_source: str) -> tuple[str, dict]:
    """A fresh scratch folder holding the submission's copy, and the job pointing at it."""
    scratch = tempfile.mkdtemp(prefix="grade-scratch-")
    submission = Path(scratch) / "submission.py"
    try:
        submission.write_text(submission_source, encoding="utf-8")
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    return scratch, dict(job, submission=str(submission))


def end_run(run: ChildRun, started: float, returncode: int | None, stdout: str, stderr: str) -> ChildRun:
    """Fill in what the parent learnt after the child ended."""
    run.seconds = time.perf_counter() - started
    run.returncode = returncode
    if returncode is not None and returncode < 0:
        run.signal_name = signal_name(-returncode)
    run.stdout = stdout
    run.stderr = stderr
    run.memory_exceeded = looks_out_of_memory(stderr)
    return run


def signal_name(number: int) -> str:
    """SIGKILL, SIGRTMIN+3, ... — any signal number, real-time ones included."""
    try:
        return signal.Signals(number).name
    except ValueError:
        if signal.SIGRTMIN <= number <= signal.SIGRTMAX:
            return f"SIGRTMIN+{number - signal.SIGRTMIN}"
        return f"signal {number}"


def _text(chunks: list[bytes]) -> str:
    text = b"".join(chunks).decode("utf-8", errors="replace")
    return text.replace("\x00", "")


# What Python, NumPy, TensorFlow and the C++ runtime say when an allocation fails.
OUT_OF_MEMORY_MARKERS = ("MemoryError", "Unable to allocate", "ResourceExhaustedError", "OOM when allocating",
                         "bad_alloc", "Cannot allocate memory")


def looks_out_of_memory(text: str) -> bool:
    return any(marker in text for marker in OUT_OF_MEMORY_MARKERS)


