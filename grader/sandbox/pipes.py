"""The parent's side of a pipe to a process it does not trust: waiting, writing, reading capped.

A grading process and a judge process each answer on pipes; what arrives is read
in blocks and kept up to a cap (a flood costs the writer its time, never the
reader its memory), and a cut is marked so that whoever reads the chunks knows.
"""

from __future__ import annotations

import os
import select

CUT = b"\n[... output cut ...]\n"  # the chunk that marks where reading stopped keeping


def readable(fd: int, seconds: float) -> bool:
    """Whether ``fd`` has something to read (or its end) within ``seconds``."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(0, int(seconds * 1000 + 0.999))))


def write_all(fd: int, data: bytes) -> None:
    """Write all of ``data``, however many writes the pipe takes."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def read_capped(fd: int, chunks: list[bytes], cap: int) -> None:
    """Read until EOF, keeping the first ``cap`` bytes and discarding the rest,
    so a flood of output costs the child time but never the parent memory."""
    total = 0
    with os.fdopen(fd, "rb", buffering=0) as pipe:
        while True:
            block = pipe.read(1 << 16)
            if not block:
                return
            if total < cap:
                chunks.append(block[: cap - total])
            total += len(block)
            if total > cap and len(chunks) and chunks[-1] is not CUT:
                chunks.append(CUT)
