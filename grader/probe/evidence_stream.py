"""The child's side of the channels to the parent: evidence going up, secrets coming down.

Evidence is one JSON line per record (``grader.protocol.wire``) on a private pipe. The
parent's secret part of the job (inputs, padding, a value for every weight)
arrives on a second pipe once the child has reported the layer's variables;
``receive`` reads it.
"""

from __future__ import annotations

import os
import time
import traceback
from contextlib import contextmanager

from ..protocol import wire

MAX_TEXT = 4000

_GRADER_CHILD = os.path.dirname(os.path.realpath(__file__)) + os.sep

# Bound once, before any student code runs, so patching os or json later changes nothing here.
_write = os.write
_read = os.read
_dumps = wire.dumps
_loads = wire.loads


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

    def emit(self, record: dict) -> None:
        data = _dumps(record)
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
        message = _loads(data)
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
        record = {"event": "end", "phase": name, "ok": error is None, "seconds": time.perf_counter() - started,
                  "data": to_plain(data), "error": error}
        try:
            _dumps(record)
        except (TypeError, ValueError) as exc:  # data that cannot travel: say so instead of dying
            record["data"] = {}
            record["ok"] = False
            record["error"] = {"type": "EvidenceError", "message": str(exc)[:MAX_TEXT], "student_frames": [],
                               "lineno": None, "offset": None}
        return record

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
            "message": _clean(message)[:MAX_TEXT],
            "student_frames": frames[-8:],
            "lineno": _int_or_none(getattr(exc, "lineno", None)),
            "offset": _int_or_none(getattr(exc, "offset", None)),
            # raised by the grader's own code in the child, not by the student's nor by Keras on its behalf
            "internal": bool(innermost) and os.path.realpath(innermost[0].filename).startswith(_GRADER_CHILD),
        }


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
