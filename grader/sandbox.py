"""Runs a submission in a child process with a wall-clock and a memory limit.

The child gets a scratch copy of the submission, its job on stdin and a
private pipe for evidence. Its stdout and stderr are captured and capped; its
exit code is recorded but never trusted. The whole process group is killed at
the time limit.
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
        """The phase the child was in when it stopped, if it stopped early."""
        for name in reversed(self.started):
            if name not in self.phases:
                return name
        return None


class Child:
    """A running child: started at once, waited for when its evidence is needed."""

    def __init__(self, job: dict, submission_source: str, timeout: float, memory_mb: int):
        self._scratch, job = make_scratch(job, submission_source)
        self._timeout = timeout
        self._result: ChildRun | None = None
        try:
            self._start(job, memory_mb)
        except BaseException:
            self._cleanup()
            raise

    def _start(self, job: dict, memory_mb: int) -> None:
        read_fd, write_fd = os.pipe()
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
                [sys.executable, "-I", "-m", "grader.child", str(write_fd)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=self._scratch,
                env=env,
                pass_fds=(write_fd,),
                start_new_session=True,
                preexec_fn=limits,
            )
        finally:
            os.close(write_fd)
        self._chunks: list[bytes] = []
        self._out: list[bytes] = []
        self._err: list[bytes] = []
        self._readers = [
            threading.Thread(target=_read_capped, daemon=True,
                             args=(os.fdopen(read_fd, "rb", buffering=0), self._chunks, MAX_EVIDENCE_BYTES)),
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
        run = ChildRun()
        try:
            remaining = self._timeout - (time.perf_counter() - self._started)
            self._proc.wait(timeout=max(remaining, 0.0))
        except subprocess.TimeoutExpired:
            run.timed_out = True
        _kill_group(self._proc)
        self._proc.wait()
        for reader in self._readers:
            reader.join(timeout=5)
        end_run(run, self._started, self._proc.returncode, b"".join(self._chunks), _text(self._out), _text(self._err))
        self._cleanup()
        self._result = run
        return run

    def _cleanup(self) -> None:
        shutil.rmtree(self._scratch, ignore_errors=True)


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


def end_run(run: ChildRun, started: float, returncode: int | None, evidence: bytes, stdout: str,
            stderr: str) -> ChildRun:
    """Fill in what the parent learnt after the child ended."""
    run.seconds = time.perf_counter() - started
    run.returncode = returncode
    if returncode is not None and returncode < 0:
        run.signal_name = signal.Signals(-returncode).name
    run.stdout = stdout
    run.stderr = stderr
    run.memory_exceeded = looks_out_of_memory(stderr)
    _parse(evidence, run)
    return run


def run_child(job: dict, submission_source: str, timeout: float, memory_mb: int) -> ChildRun:
    """Run ``grader.child`` on ``submission_source`` (the text of the student's code)."""
    return Child(job, submission_source, timeout, memory_mb).wait()


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


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


def _parse(data: bytes, run: ChildRun) -> None:
    """Phase records, strictly: a record that does not parse, or a phase reported
    twice, makes the whole stream untrusted."""
    for raw in data.split(b"\n"):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            run.protocol_error = "the grading process sent data that is not valid evidence"
            return
        if not isinstance(record, dict):
            run.protocol_error = "the grading process sent data that is not valid evidence"
            return
        event = record.get("event")
        if event == "start" and isinstance(record.get("phase"), str):
            run.started.append(record["phase"])
        elif event == "end" and isinstance(record.get("phase"), str):
            if record["phase"] in run.phases:
                run.protocol_error = f"phase {record['phase']!r} was reported twice"
                return
            run.phases[record["phase"]] = record
        elif event == "done":
            run.finished = True
        else:
            run.protocol_error = "the grading process sent an unknown record"
            return
