"""Reads a submission (.py file or .ipynb notebook) into the Python source to grade."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

MAX_BYTES = 50 * 1024 * 1024


class SubmissionError(Exception):
    """The submission cannot be read as Python source."""


def read_source(path: Path) -> str:
    """The source to grade. ``path`` itself must be a regular file: a symbolic link is refused, not
    followed (it could point anywhere the grader may read, the solutions included)."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise SubmissionError(f"{path} does not exist.") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SubmissionError(f"{path} is a symbolic link; a submission must be the file itself, "
                                  "so the file it points to was not read.") from None
        if exc.errno == errno.EISDIR:
            raise SubmissionError(f"{path} is not a file.") from None
        raise SubmissionError(f"{path} cannot be read ({exc.strerror}).") from None
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise SubmissionError(f"{path} is not a file.")
        data = handle.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise SubmissionError(f"{path.name} is larger than {MAX_BYTES // (1024 * 1024)} MiB; it is not graded.")
    if path.suffix == ".ipynb":
        return notebook_source(data, path)
    if path.suffix != ".py":
        raise SubmissionError(f"{path.name}: a submission is a .py file or an .ipynb notebook.")
    return python_source(data, path)


def python_source(data: bytes, path: Path) -> str:
    if b"\x00" in data:
        raise SubmissionError(f"{path.name} contains NUL bytes; it is not a Python source file.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SubmissionError(
            f"{path.name} is not UTF-8 text (byte {exc.start} cannot be decoded); save it as UTF-8."
        ) from None


def notebook_source(data: bytes, path: Path) -> str:
    """The notebook's answer cells (for an nbgrader notebook) or all its code cells, in order,
    with IPython magics and shell escapes commented out."""
    try:
        notebook = json.loads(data.decode("utf-8"))
        cells = notebook["cells"]
        if not isinstance(cells, list):
            raise TypeError("cells is not a list")
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise SubmissionError(f"{path.name} is not a readable notebook ({exc}).") from None
    code = [cell for cell in cells if isinstance(cell, dict) and cell.get("cell_type") == "code"]
    answers = [cell for cell in code if _is_nbgrader_answer(cell)]
    chunks = []
    for number, cell in enumerate(answers or code, 1):  # an nbgrader notebook: only its answer cells, not its tests
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(line, str) for line in source):
            text = "".join(source)
        elif isinstance(source, str):
            text = source
        else:
            raise SubmissionError(f"{path.name} is not a readable notebook (the source of code cell {number} "
                                  "is not text).")
        lines = [f"# {line}" if line.lstrip().startswith(("%", "!")) else line for line in text.splitlines()]
        chunks.append("\n".join(lines))
    return "\n\n".join(chunks) + "\n"


def _is_nbgrader_answer(cell: dict) -> bool:
    meta = cell.get("metadata")
    nbgrader = meta.get("nbgrader") if isinstance(meta, dict) else None
    return isinstance(nbgrader, dict) and nbgrader.get("solution") is True
