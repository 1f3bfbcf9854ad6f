"""The child's side of the evidence channel: one JSON line per phase on a private pipe."""

from __future__ import annotations

import json
import os
import time
import traceback
from contextlib import contextmanager

import numpy as np

MAX_TEXT = 4000

# Bound once, before any student code runs, so patching os or json later changes nothing here.
_write = os.write
_dumps = json.dumps


class EvidenceStream:
    """Writes phase records to the file descriptor the parent handed over."""

    def __init__(self, fd: int | None, submission_path: str, send=None):
        """Write to file descriptor ``fd``, or hand each line to ``send`` (a pipe's send_bytes)."""
        self._fd = fd
        self._send = send
        self._submission_path = os.path.realpath(submission_path)

    def emit(self, record: dict) -> None:
        line = _dumps(record, allow_nan=True) + "\n"
        data = line.encode("utf-8")
        if self._send is not None:
            self._send(data)
            return
        while data:
            written = _write(self._fd, data)
            data = data[written:]

    @contextmanager
    def phase(self, name: str):
        """Run one phase; emit its data, or the student's error, as one record."""
        started = time.perf_counter()
        self.emit({"event": "start", "phase": name})
        data: dict = {}
        try:
            yield data
        except BaseException as exc:  # student code may raise anything, SystemExit included
            self.emit(
                {
                    "event": "end",
                    "phase": name,
                    "ok": False,
                    "seconds": time.perf_counter() - started,
                    "data": to_plain(data),
                    "error": self.describe_error(exc),
                }
            )
            return
        self.emit(
            {
                "event": "end",
                "phase": name,
                "ok": True,
                "seconds": time.perf_counter() - started,
                "data": to_plain(data),
                "error": None,
            }
        )

    def describe_error(self, exc: BaseException) -> dict:
        """The exception and the frames of its traceback that are in the student's file."""
        frames = []
        for frame in traceback.extract_tb(exc.__traceback__):
            if os.path.realpath(frame.filename) == self._submission_path:
                frames.append(
                    {"line": frame.lineno, "function": frame.name, "code": (frame.line or "")[:200]}
                )
        message = str(exc)
        return {
            "type": type(exc).__name__,
            "message": _clean(message)[:MAX_TEXT],
            "student_frames": frames[-8:],
            "lineno": getattr(exc, "lineno", None),
            "offset": getattr(exc, "offset", None),
        }


def _clean(text: str) -> str:
    """Drop ANSI escapes Keras puts into exception messages."""
    import re

    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def to_plain(value):
    """Turn numpy arrays, tensors and nested containers into JSON-ready data."""
    if isinstance(value, dict):
        return {str(k): to_plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_plain(v) for v in value]
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return array_record(value)
    return repr(value)[:200]


def array_record(array: np.ndarray) -> dict:
    array = np.asarray(array)
    if array.dtype == bool:
        values = array.tolist()
    else:
        values = array.astype(np.float64).tolist()
    return {"__array__": True, "dtype": str(array.dtype), "shape": list(array.shape), "values": values}
