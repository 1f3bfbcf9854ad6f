"""The child's side of the channels to the parent: evidence going up, secrets coming down.

Evidence is one JSON line per record (``grader.protocol.wire``) on a private pipe. The
parent's secret part of the job (inputs, padding, a value for every weight)
arrives on a second pipe once the child has reported the layer's variables;
``receive`` reads it.

Before a phase's record is sent it is read as the parent will read it
(``grader.protocol.records.arrived``, within ``grader.protocol.limits``): a record
the parent would refuse, or one that would take the evidence past its bounds,
is replaced by the phase ended with ``LimitExceeded``, naming the limit. The
parent never has to refuse what an honest grading process sends, and the
grading goes on at once.
"""

from __future__ import annotations

import os
import time
import traceback
from contextlib import contextmanager

from ..protocol import limits, records, wire
from ..protocol.limits import LimitExceeded

_GRADER_CHILD = os.path.dirname(os.path.realpath(__file__)) + os.sep

# Bound once, before any student code runs, so patching os or json later changes nothing here.
_write = os.write
_read = os.read
_dumps = wire.dumps
_loads = wire.loads
_arrived = records.arrived


class EvidenceStream:
    """Writes phase records to the evidence channel and reads the parent's secrets."""

    def __init__(self, fd: int | None, submission_path: str, send=None, control_fd: int | None = None,
                 receive=None):
        """Write to file descriptor ``fd``, or hand each line to ``send`` (a pipe's send_bytes);
        read the secrets from ``control_fd``, or from ``receive()`` (a pipe's recv_bytes)."""
        self._fd = fd
        self._send = send
        self._control_fd = control_fd
        self._receive = receive
        self._submission_path = os.path.realpath(submission_path)
        self._sent = 0  # bytes of evidence sent, as the parent counts them
        self._forwarded = 0  # bytes they take forwarded to a judge (records.arrived)
        self._values = 0  # JSON values in them (wire.tokens)
        self._checked: tuple[dict, int] | None = None  # the end record _end made, and its bytes forwarded

    def emit(self, record: dict) -> None:
        """Send one record. A phase's end record comes read as the parent will read it (``_end``), with
        the bytes it takes forwarded; any other is a few bytes, counted as forwarded at most."""
        data = _dumps(record)
        checked, self._checked = self._checked, None
        self._sent += len(data)
        self._forwarded += checked[1] if checked is not None and checked[0] is record else \
            len(data) + limits.CELL_NAME_BYTES
        self._values += wire.tokens(data)
        if self._send is not None:
            self._send(data)
            return
        while data:
            written = _write(self._fd, data)
            data = data[written:]

    def receive(self) -> dict | None:
        """The parent's message on the control channel (None if the parent sent nothing)."""
        if self._receive is not None:
            try:
                data = self._receive()
            except (EOFError, OSError):
                return None
        else:
            if self._control_fd is None:
                return None
            chunks = []
            while True:
                block = _read(self._control_fd, 1 << 20)
                if not block:
                    break
                chunks.append(block)
            os.close(self._control_fd)
            self._control_fd = None
            data = b"".join(chunks)
        if not data.strip():
            return None
        try:
            message = _loads(data.rstrip(b"\n"), limits.MAX_SECRET_BYTES)
        except wire.WireError:
            return None  # the parent's message is within the same limits: nothing to go on with
        return message if isinstance(message, dict) else None

    @contextmanager
    def phase(self, name: str):
        """Run one phase; emit its data, or the student's error, as one record."""
        started = time.perf_counter()
        self.emit({"event": "start", "phase": name})
        data: dict = {}
        try:
            yield data
        except BaseException as exc:  # student code may raise anything, SystemExit included
            self.emit(self._end(name, started, data, self.describe_error(exc)))
            return
        self.emit(self._end(name, started, data, None))

    def _end(self, name: str, started: float, data: dict, error: dict | None) -> dict:
        """A phase's end record as the parent will accept it: the record itself, or the phase ended with
        the reason it cannot travel."""
        record = {"event": "end", "phase": name, "ok": error is None, "seconds": time.perf_counter() - started,
                  "data": to_plain(data), "error": error}
        try:
            line = _dumps(record)
        except (TypeError, ValueError) as exc:  # data that cannot travel: say so instead of dying
            return _failed(record, "EvidenceError", str(exc))
        problem, forwarded = self._refusal(line)
        if problem:
            return _failed(record, LimitExceeded.__name__,
                           f"what your layer gave here is more than the grader reads: {problem}")
        self._checked = record, forwarded
        return record

    def _refusal(self, line: bytes) -> tuple[str | None, int]:
        """(why the parent would refuse ``line`` after the evidence sent so far, naming the limit, or
        None; the bytes it takes forwarded). Room stays for the records of the phases after a refused one."""
        try:
            _, forwarded = _arrived(line.rstrip(b"\n"))
        except wire.WireError as exc:
            return str(exc), 0
        if forwarded > limits.MAX_RECORD_BYTES:
            return f"a record would take more than the {limits.MAX_RECORD_BYTES:,} bytes the grader forwards of one", 0
        if max(self._sent + len(line), self._forwarded + forwarded) > \
                limits.MAX_EVIDENCE_BYTES - limits.EVIDENCE_RESERVE:
            return f"the evidence of one grading would pass the {limits.MAX_EVIDENCE_BYTES:,} bytes the grader reads", 0
        if self._values + wire.tokens(line) > limits.MAX_EVIDENCE_VALUES - limits.EVIDENCE_RESERVE_VALUES:
            return (f"the evidence of one grading would pass the {limits.MAX_EVIDENCE_VALUES:,} values the grader "
                    "reads"), 0
        return None, forwarded

    def describe_error(self, exc: BaseException) -> dict:
        """The exception and the frames of its traceback that are in the student's file. When Keras
        re-raised the student's exception as its own RuntimeError ("Exception encountered when
        calling ..."), the student's original exception is described."""
        original = exc
        for _ in range(5):
            inner = original.__cause__ or original.__context__
            if inner is None or "Exception encountered when calling" not in str(original):
                break
            original = inner
        exc = original
        frames = []
        for frame in traceback.extract_tb(exc.__traceback__):
            if os.path.realpath(frame.filename) == self._submission_path:
                frames.append(
                    {"line": frame.lineno, "function": frame.name, "code": (frame.line or "")[:200]}
                )
        message = str(exc)
        innermost = traceback.extract_tb(exc.__traceback__)[-1:] if exc.__traceback__ else []
        return {
            "type": type(exc).__name__,
            "message": _clean(message)[:limits.MAX_TEXT],
            "student_frames": frames[-limits.MAX_FRAMES:],
            "lineno": _int_or_none(getattr(exc, "lineno", None)),
            "offset": _int_or_none(getattr(exc, "offset", None)),
            # raised by the grader's own code in the child, not by the student's nor by Keras on its behalf;
            # a limit the layer passed is the layer's
            "internal": bool(innermost) and os.path.realpath(innermost[0].filename).startswith(_GRADER_CHILD)
            and not isinstance(exc, LimitExceeded),
        }


def _failed(record: dict, kind: str, message: str) -> dict:
    """``record`` as a phase that ended with an error of the grader's naming, its data dropped."""
    return dict(record, data={}, ok=False, error={"type": kind, "message": message[:limits.MAX_TEXT],
                                                  "student_frames": [], "lineno": None, "offset": None,
                                                  "internal": False})


def _int_or_none(value):
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _clean(text: str) -> str:
    """Drop ANSI escapes Keras puts into exception messages."""
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def to_plain(value):
    """Turn arrays, tensors and nested containers into data ``grader.protocol.wire`` can send."""
    import numpy as np

    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else repr(value)
    if isinstance(value, np.generic):
        return to_plain(value.item())
    if isinstance(value, np.ndarray):
        return value
    return repr(value)[:200]
