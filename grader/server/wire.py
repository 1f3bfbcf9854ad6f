"""What crosses the grading server's socket: length-prefixed JSON messages, each bounded.

A message is four bytes (big-endian, its length) and that many bytes of UTF-8 JSON, an object. A
request is at most ``MAX_REQUEST`` bytes, an answer at most ``MAX_ANSWER``; anything else ends the
connection. A client sends one request per connection:

- ``{"op": "grade", "protocol", "identity", "exercise", "submission", "settings", "all_backends"}``:
  the server first answers ``{"accepted": true}`` (it has taken the grading on), then
  ``{"ok": true, "verdict": ...}`` (``grader.verdict.to_record``) or, with ``all_backends``,
  ``{"ok": true, "comparison": ...}``. Instead of accepting it may answer
  ``{"ok": false, "stale": true}`` (it was started from another installation: it is leaving, start
  a new one) or ``{"ok": false, "error": ...}``.
- ``{"op": "status"}``: ``{"ok": true, "status": {...}}``.
- ``{"op": "stop"}``: ``{"ok": true, "pid": ...}``, and the server ends with its workers.
"""

from __future__ import annotations

import json
import socket
import struct
import time

from ..protocol import limits

MAX_REQUEST = 64 * 1024
# a verdict on each of the three backends a comparison grades on (grader.backends.NAMES); a verdict
# is tens of KB, its bound limits.MAX_VERDICT_BYTES
MAX_ANSWER = 3 * limits.MAX_VERDICT_BYTES
_LENGTH = struct.Struct(">I")


class WireError(Exception):
    """The other end sent no message of the protocol's form, or went away."""


class Closed(WireError):
    """The other end closed the connection before a message began."""


def send(sock: socket.socket, message: dict) -> None:
    data = json.dumps(message, separators=(",", ":")).encode("utf-8")
    sock.sendall(_LENGTH.pack(len(data)) + data)


def receive(sock: socket.socket, limit: int, seconds: float | None = None) -> dict:
    """One message of at most ``limit`` bytes, within ``seconds`` (None: no time limit)."""
    deadline = None if seconds is None else time.monotonic() + seconds
    header = _exactly(sock, _LENGTH.size, deadline, first=True)
    (length,) = _LENGTH.unpack(header)
    if length > limit:
        raise WireError(f"a message of {length} bytes, more than the {limit} accepted")
    try:
        message = json.loads(_exactly(sock, length, deadline).decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise WireError(f"a message that is not JSON ({exc})") from None
    if not isinstance(message, dict):
        raise WireError("a message that is not a JSON object")
    return message


def _exactly(sock: socket.socket, count: int, deadline: float | None, first: bool = False) -> bytes:
    chunks, got = [], 0
    while got < count:
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                raise WireError("no complete message in time")
            sock.settimeout(left)
        else:
            sock.settimeout(None)
        try:
            block = sock.recv(min(count - got, 1 << 20))
        except socket.timeout:
            raise WireError("no complete message in time") from None
        except OSError as exc:
            raise WireError(f"the connection failed ({exc.strerror or exc})") from None
        if not block:
            if first and got == 0:
                raise Closed("the connection was closed")
            raise WireError("the connection was closed in the middle of a message")
        chunks.append(block)
        got += len(block)
    return b"".join(chunks)


def peer(sock: socket.socket) -> tuple[int, int]:
    """(pid, uid) of the process at the other end of a connected Unix socket, from the kernel."""
    pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED,
                                                          struct.calcsize("3i")))
    return pid, uid
