"""The parent's reading of a grading process's evidence: ``RecordParser`` takes the records as they
arrive on the evidence pipe, strictly and within bounds (bytes, JSON values, every string the
submission could shape: ``grader.protocol.limits``), into a ``ChildRun``, what the parent saw of one
grading process.

Whatever bytes arrive, the reading ends in one of two ways: the records, or a run marked untrusted
(``protocol_error``) with the reason, after which nothing more is read and whoever waits for the
grading process ends it at once. No exception leaves the parser or the thread that feeds it.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field

from ..protocol import limits, records, wire

TOO_MUCH = "the grading process sent more evidence than the grader accepts"
NOT_EVIDENCE = "the grading process sent data that is not valid evidence"


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


class Untrusted(Exception):
    """Raised by a parser's ``respond``: the record it was given makes the whole run untrusted, for the
    reason the message gives."""


class RecordParser:
    """Reads evidence records as they arrive, strictly: a record that does not parse, an
    unknown record or a phase reported twice makes the whole stream untrusted, and nothing
    after it is read. ``respond(record)`` sees each good record; what it returns is sent
    down ``control``, the control channel (``grader.sandbox.process.ControlChannel``), which an
    untrusted stream closes; a ``respond`` that raises ``Untrusted`` makes the stream untrusted.
    ``feed`` and ``finish`` never raise."""

    def __init__(self, run: ChildRun, respond=None, control=None):
        self.run = run
        self._respond = respond
        self._control = control
        self._buffer = bytearray()
        self._total = 0  # bytes arrived
        self._forwarded = 0  # bytes the records take forwarded to a judge (records.arrived)
        self._tokens = 0
        self._lock = threading.Lock()
        self.ready_at: float | None = None  # when the runtime phase ended: the submission's clock starts

    def feed(self, data: bytes) -> None:
        with self._lock:
            if self.run.protocol_error:
                return
            try:
                self._feed(data)
            except Exception as exc:  # noqa: BLE001 - the decoders are total; whatever is left is the data's fault
                self._fail(f"{NOT_EVIDENCE} ({type(exc).__name__} while the grader read it)")

    def _feed(self, data: bytes) -> None:
        self._total += len(data)
        if self._total > limits.MAX_EVIDENCE_BYTES:
            self._fail(f"{TOO_MUCH} (more than {limits.MAX_EVIDENCE_BYTES:,} bytes)")
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
        if len(self._buffer) > limits.MAX_RECORD_BYTES and not self.run.protocol_error:
            self._fail(f"{NOT_EVIDENCE} (a record is too long: the grader reads at most "
                       f"{limits.MAX_RECORD_BYTES:,} bytes in one record)")

    def finish(self) -> None:
        with self._lock:
            try:
                if self._buffer.strip() and not self.run.protocol_error:
                    self._line(bytes(self._buffer))
            except Exception as exc:  # noqa: BLE001 - as in feed
                self._fail(f"{NOT_EVIDENCE} ({type(exc).__name__} while the grader read it)")
            self._buffer.clear()

    def fail(self, why: str) -> None:
        """Make the run untrusted for ``why`` (the first reason stays), from any thread."""
        with self._lock:
            if not self.run.protocol_error:
                self._fail(why)

    def _fail(self, why: str) -> None:
        self.run.protocol_error = why
        self._buffer.clear()
        if self._control is not None:
            self._control.close()  # a child waiting for its secrets learns there are none

    def _line(self, line: bytes) -> None:
        run = self.run
        self._tokens += wire.tokens(line)
        if self._tokens > limits.MAX_EVIDENCE_VALUES:
            self._fail(f"{TOO_MUCH} (more than {limits.MAX_EVIDENCE_VALUES:,} values)")
            return
        try:
            # every string the submission could shape, cut once, here; and what the record costs forwarded
            record, forwarded = records.arrived(line)
        except wire.WireError as exc:
            self._fail(f"{NOT_EVIDENCE} ({exc})")
            return
        if forwarded > limits.MAX_RECORD_BYTES:
            self._fail(f"{NOT_EVIDENCE} (a record is too long: the grader forwards at most "
                       f"{limits.MAX_RECORD_BYTES:,} bytes of one record)")
            return
        self._forwarded += forwarded
        if self._forwarded > limits.MAX_EVIDENCE_BYTES:
            self._fail(f"{TOO_MUCH} (more than {limits.MAX_EVIDENCE_BYTES:,} bytes)")
            return
        if not isinstance(record, dict):
            self._fail(NOT_EVIDENCE)
            return
        event, phase = record.get("event"), record.get("phase")
        if event == "start" and isinstance(phase, str):
            run.started.append(phase)
        elif event == "end" and isinstance(phase, str):
            if phase in run.phases:
                self._fail(f"the grading process sent evidence that reports phase {phase!r} twice")
                return
            problem = records.problem(record)
            if problem:
                self._fail(f"the grading process sent evidence whose record of phase {phase!r} is malformed "
                           f"({problem})")
                return
            run.phases[phase] = record
            if phase == "runtime" and self.ready_at is None:
                self.ready_at = time.perf_counter()
        elif event == "done":
            run.finished = True
        else:
            self._fail("the grading process sent an unknown record as evidence")
            return
        if self._respond is not None:
            try:
                answer = self._respond(record)
            except Untrusted as exc:
                self._fail(str(exc))
                return
            except Exception as exc:  # noqa: BLE001 - the grader's own failure: the run cannot go on
                self._fail(f"the grader could not answer the grading process's evidence ({type(exc).__name__}: "
                           f"{str(exc)[:200]})")
                return
            if self._control is not None and answer is not None:
                self._control.send(answer)


def read_records(fd: int, parser: "RecordParser") -> None:
    """The evidence reader's thread: feeds ``parser`` until the pipe ends. It never dies of an
    exception (which would leave the parent waiting on a child it no longer reads): whatever fails
    makes the run untrusted."""
    try:
        with os.fdopen(fd, "rb", buffering=0) as pipe:
            while True:
                block = pipe.read(1 << 16)
                if not block:
                    return
                parser.feed(block)
    except Exception as exc:  # noqa: BLE001 - see above
        parser.fail(f"the grader could not read the grading process's evidence ({type(exc).__name__})")
