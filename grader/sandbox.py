"""Runs a submission in a child process with a wall-clock and a memory limit.

The child gets a scratch copy of the submission, the public part of its job on
stdin, a private pipe for evidence and a second pipe, the control channel, on
which the parent answers the child's report of the layer's variables with the
secret part of the job (``respond``). Evidence is parsed as it arrives. The
child's stdout and stderr are captured and capped; its exit code is recorded
but never trusted. The whole process group is killed at the time limit.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import wire

MAX_EVIDENCE_BYTES = 64 * 1024 * 1024
MAX_OUTPUT_BYTES = 32 * 1024
MAX_FILE_BYTES = 256 * 1024 * 1024

CHILD_ENV = {
    "TF_CPP_MIN_LOG_LEVEL": "3",
    "TF_ENABLE_ONEDNN_OPTS": "0",
    "CUDA_VISIBLE_DEVICES": "-1",
    "PYTHONHASHSEED": "0",
    "PYTHONDONTWRITEBYTECODE": "1",
    "OMP_NUM_THREADS": "1",
}
_PASSED_THROUGH = ("PATH", "HOME", "LANG", "LC_ALL", "OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "TMPDIR")


@dataclass
class ChildRun:
    """What the parent saw of one child: phase records and how it ended."""

    phases: dict[str, dict] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)
    finished: bool = False
    timed_out: bool = False
    memory_exceeded: bool = False
    returncode: int | None = None
    signal_name: str | None = None
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    protocol_error: str | None = None

    @property
    def unfinished_phase(self) -> str | None:
        """The phase the child was in when it stopped, if it stopped early (a notebook's cells are
        steps inside the load phase: one counts only while the load has not ended)."""
        for name in reversed(self.started):
            if name.startswith("load:"):
                if "load" not in self.phases:
                    return "load"
                continue
            if name not in self.phases:
                return name
        return None


class Child:
    """A running child: started at once, waited for when its evidence is needed."""

    def __init__(self, job: dict, submission_source: str, timeout: float, memory_mb: int, respond=None):
        """``respond(record)`` is called for each evidence record as it arrives; bytes it returns
        are written to the child's control channel (once), which is then closed."""
        self._scratch, job = make_scratch(job, submission_source)
        self._timeout = timeout
        self._result: ChildRun | None = None
        try:
            self._start(job, memory_mb, respond)
        except BaseException:
            self._cleanup()
            raise

    def _start(self, job: dict, memory_mb: int, respond) -> None:
        read_fd, write_fd = os.pipe()
        control_read, control_write = os.pipe()
        env = {k: os.environ[k] for k in _PASSED_THROUGH if k in os.environ}
        env.update(child_environment(self._scratch))
        limit = int(memory_mb) * 1024 * 1024

        def limits():
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
            resource.setrlimit(resource.RLIMIT_FSIZE, (MAX_FILE_BYTES, MAX_FILE_BYTES))

        self._started = time.perf_counter()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-m", "grader.child", str(write_fd), str(control_read)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self._scratch,
                env=env,
                pass_fds=(write_fd, control_read),
                start_new_session=True,
                preexec_fn=limits,
            )
        except BaseException:
            os.close(control_write)
            raise
        finally:
            os.close(write_fd)
            os.close(control_read)
        self._control = ControlChannel(lambda data: _write_all(control_write, data), lambda: os.close(control_write))
        self._parser = RecordParser(ChildRun(), respond, self._control)
        self._out: list[bytes] = []
        self._err: list[bytes] = []
        self._readers = [
            threading.Thread(target=_read_records, daemon=True,
                             args=(os.fdopen(read_fd, "rb", buffering=0), self._parser)),
            threading.Thread(target=_read_capped, args=(self._proc.stdout, self._out, MAX_OUTPUT_BYTES), daemon=True),
            threading.Thread(target=_read_capped, args=(self._proc.stderr, self._err, MAX_OUTPUT_BYTES), daemon=True),
        ]
        for reader in self._readers:
            reader.start()
        try:
            self._proc.stdin.write(json.dumps(job).encode("utf-8"))
            self._proc.stdin.close()
        except (BrokenPipeError, OSError):
            pass

    def wait(self) -> ChildRun:
        """Wait for the child (killing it at the time limit) and return what it sent."""
        if self._result is not None:
            return self._result
        run = self._parser.run
        try:
            remaining = self._timeout - (time.perf_counter() - self._started)
            self._proc.wait(timeout=max(remaining, 0.0))
        except subprocess.TimeoutExpired:
            run.timed_out = True
        _kill_group(self._proc)
        self._proc.wait()
        for reader in self._readers:
            reader.join(timeout=5)
        self._control.close()
        end_run(run, self._started, self._proc.returncode, _text(self._out), _text(self._err))
        self._parser.finish()
        self._cleanup()
        self._result = run
        return run

    def _cleanup(self) -> None:
        shutil.rmtree(self._scratch, ignore_errors=True)


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


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def child_environment(scratch: str) -> dict:
    """Environment variables of a child: quiet TensorFlow, and every home or cache in its scratch folder."""
    env = dict(CHILD_ENV)
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


def run_child(job: dict, submission_source: str, timeout: float, memory_mb: int, respond=None) -> ChildRun:
    """Run ``grader.child`` on ``submission_source`` (the text of the student's code)."""
    return Child(job, submission_source, timeout, memory_mb, respond).wait()


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _read_records(pipe, parser: "RecordParser") -> None:
    with pipe:
        while True:
            block = pipe.read(1 << 16)
            if not block:
                return
            parser.feed(block)


def _read_capped(pipe, chunks: list[bytes], cap: int) -> None:
    """Read until EOF, keeping the first ``cap`` bytes and discarding the rest,
    so a flood of output costs the child time but never the parent memory."""
    total = 0
    with pipe:
        while True:
            block = pipe.read(1 << 16)
            if not block:
                return
            if total < cap:
                chunks.append(block[: cap - total])
            total += len(block)
            if total > cap and len(chunks) and chunks[-1] is not _CUT:
                chunks.append(_CUT)


_CUT = b"\n[... output cut ...]\n"


def _text(chunks: list[bytes]) -> str:
    text = b"".join(chunks).decode("utf-8", errors="replace")
    return text.replace("\x00", "")


# What Python, NumPy, TensorFlow and the C++ runtime say when an allocation fails.
OUT_OF_MEMORY_MARKERS = ("MemoryError", "Unable to allocate", "ResourceExhaustedError", "OOM when allocating",
                         "bad_alloc", "Cannot allocate memory")


def looks_out_of_memory(text: str) -> bool:
    return any(marker in text for marker in OUT_OF_MEMORY_MARKERS)


class RecordParser:
    """Reads evidence records as they arrive, strictly: a record that does not parse, an
    unknown record or a phase reported twice makes the whole stream untrusted, and nothing
    after it is read. ``respond(record)`` sees each good record; what it returns is sent
    down the control channel."""

    def __init__(self, run: ChildRun, respond=None, control: "ControlChannel | None" = None):
        self.run = run
        self._respond = respond
        self._control = control
        self._buffer = bytearray()
        self._total = 0
        self._lock = threading.Lock()

    def feed(self, data: bytes) -> None:
        with self._lock:
            if self.run.protocol_error:
                return
            self._total += len(data)
            if self._total > MAX_EVIDENCE_BYTES:
                self._fail("the grading process sent more evidence than the grader accepts")
                return
            self._buffer.extend(data)
            while not self.run.protocol_error:
                end = self._buffer.find(b"\n")
                if end < 0:
                    break
                line = bytes(self._buffer[:end])
                del self._buffer[:end + 1]
                if line.strip():
                    self._line(line)

    def finish(self) -> None:
        with self._lock:
            if self._buffer.strip() and not self.run.protocol_error:
                self._line(bytes(self._buffer))
            self._buffer.clear()

    def _fail(self, why: str) -> None:
        self.run.protocol_error = why
        self._buffer.clear()
        if self._control is not None:
            self._control.close()  # a child waiting for its secrets learns there are none

    def _line(self, line: bytes) -> None:
        run = self.run
        try:
            record = wire.loads(line)
        except wire.WireError as exc:
            self._fail(f"the grading process sent data that is not valid evidence ({exc})")
            return
        if not isinstance(record, dict):
            self._fail("the grading process sent data that is not valid evidence")
            return
        event, phase = record.get("event"), record.get("phase")
        if event == "start" and isinstance(phase, str):
            run.started.append(phase)
        elif event == "end" and isinstance(phase, str):
            if phase in run.phases:
                self._fail(f"phase {phase!r} was reported twice")
                return
            problem = _malformed_end(record)
            if problem:
                self._fail(f"the record of phase {phase!r} is malformed ({problem})")
                return
            run.phases[phase] = record
        elif event == "done":
            run.finished = True
        else:
            self._fail("the grading process sent an unknown record")
            return
        if self._respond is not None:
            answer = self._respond(record)
            if self._control is not None and answer is not None:
                self._control.send(answer)


def _malformed_end(record: dict) -> str | None:
    if not isinstance(record.get("ok"), bool):
        return "ok is not true or false"
    if not isinstance(record.get("data"), dict):
        return "data is not an object"
    error = record.get("error")
    if record["ok"] and error is not None:
        return "a successful phase carries an error"
    if not record["ok"]:
        if not isinstance(error, dict):
            return "a failed phase carries no error"
        if not isinstance(error.get("type", ""), str) or not isinstance(error.get("message", ""), str):
            return "the error's type or message is not text"
        frames = error.get("student_frames", [])
        if not isinstance(frames, list) or not all(
                isinstance(f, dict) and isinstance(f.get("code", ""), str)
                and isinstance(f.get("function", ""), str) for f in frames):
            return "the error's frames are malformed"
    return None
