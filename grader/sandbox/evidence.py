"""The parent's reading of a grading process's evidence: ``RecordParser`` takes the records as they
arrive on the evidence pipe, strictly and within bounds (bytes, JSON values, every string the
submission could shape), into a ``ChildRun``, what the parent saw of one grading process.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

from ..protocol import records, text, wire

MAX_EVIDENCE_BYTES = 24 * 1024 * 1024  # a correct run sends about 1 MB
MAX_EVIDENCE_TOKENS = 1_000_000  # JSON values in all the evidence (a correct run sends a few thousand)


@dataclass
class ChildRun:
    """What the parent saw of one child: phase records and how it ended."""

    phases: dict[str, dict] = field(default_factory=dict)
    started: list[str] = field(default_factory=list)
    finished: bool = False
    timed_out: bool = False
    startup_timed_out: bool = False  # the grading process never got ready: no line of the submission ran
    memory_exceeded: bool = False
    returncode: int | None = None
    signal_name: str | None = None
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    student_seconds: float | None = None  # from the runtime's readiness to the end: the submission's time
    time_limit: float | None = None  # the submission's limit, in seconds
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


class RecordParser:
    """Reads evidence records as they arrive, strictly: a record that does not parse, an
    unknown record or a phase reported twice makes the whole stream untrusted, and nothing
    after it is read. ``respond(record)`` sees each good record; what it returns is sent
    down ``control``, the control channel (``grader.sandbox.process.ControlChannel``), which an
    untrusted stream closes."""

    def __init__(self, run: ChildRun, respond=None, control=None):
        self.run = run
        self._respond = respond
        self._control = control
        self._buffer = bytearray()
        self._total = 0
        self._tokens = 0
        self._lock = threading.Lock()
        self.ready_at: float | None = None  # when the runtime phase ended: the submission's clock starts

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
        self._tokens += wire.tokens(line)
        if self._tokens > MAX_EVIDENCE_TOKENS:
            self._fail("the grading process sent more evidence than the grader accepts")
            return
        try:
            record = text.bounded(wire.loads(line))  # every string the submission could shape, cut once, here
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
            problem = records.problem(record)
            if problem:
                self._fail(f"the record of phase {phase!r} is malformed ({problem})")
                return
            run.phases[phase] = record
            if phase == "runtime" and self.ready_at is None:
                self.ready_at = time.perf_counter()
        elif event == "done":
            run.finished = True
        else:
            self._fail("the grading process sent an unknown record")
            return
        if self._respond is not None:
            answer = self._respond(record)
            if self._control is not None and answer is not None:
                self._control.send(answer)


def read_records(fd: int, parser: "RecordParser") -> None:
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while True:
            block = pipe.read(1 << 16)
            if not block:
                return
            parser.feed(block)
