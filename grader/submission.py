"""Reads a submission (.py file or .ipynb notebook) into the Python source to grade.

A notebook is graded as nbgrader runs it: every code cell that is not a test
cell, in order, with IPython magics and shell escapes commented out. The
source keeps a map from its lines back to the notebook's cells, so errors can
name the cell.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

MAX_BYTES = 50 * 1024 * 1024


class SubmissionError(Exception):
    """The submission cannot be read as Python source."""


@dataclass
class Source:
    """The Python source to grade, and for a notebook where each of its lines came from."""

    text: str
    cells: list = field(default_factory=list)  # (first line, last line, code cell number), 1-based

    def where(self, line) -> str:
        """'line 12', or for a notebook 'code cell 3, line 4'."""
        if not isinstance(line, int):
            return f"line {line}"
        for first, last, number in self.cells:
            if first <= line <= last:
                return f"code cell {number}, line {line - first + 1}"
        return f"line {line}"


def read_submission(path: Path) -> Source:
    """The source to grade. ``path`` itself must be a regular file: a symbolic link is refused, not
    followed (it could point anywhere the grader may read, the solutions included)."""
    path = Path(path)
    data = _read_file_itself(path)
    if path.suffix == ".ipynb":
        return notebook_submission(data, path)
    if path.suffix != ".py":
        raise SubmissionError(f"{path.name}: a submission is a .py file or an .ipynb notebook.")
    return Source(python_source(data, path))


def read_source(path: Path) -> str:
    return read_submission(path).text


def _read_file_itself(path: Path) -> bytes:
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
    return data


def python_source(data: bytes, path: Path) -> str:
    if b"\x00" in data:
        raise SubmissionError(f"{path.name} contains NUL bytes; it is not a Python source file.")
    try:
        return data.decode("utf-8-sig")  # a byte order mark (Notepad's UTF-8) is not part of the code
    except UnicodeDecodeError as exc:
        raise SubmissionError(
            f"{path.name} is not UTF-8 text (byte {exc.start} cannot be decoded); save it as UTF-8."
        ) from None


def notebook_source(data: bytes, path: Path) -> str:
    return notebook_submission(data, path).text


def notebook_submission(data: bytes, path: Path) -> Source:
    """Every code cell of the notebook that is not an nbgrader test cell, in order, with IPython
    magics and shell escapes commented out, and the map of its lines to the cells."""
    try:
        notebook = json.loads(data.decode("utf-8-sig"))
        cells = notebook["cells"]
        if not isinstance(cells, list):
            raise TypeError("cells is not a list")
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise SubmissionError(f"{path.name} is not a readable notebook ({str(exc)[:200]}).") from None
    code = [cell for cell in cells if isinstance(cell, dict) and cell.get("cell_type") == "code"]
    chunks, places, line = [], [], 1
    for number, cell in enumerate(code, start=1):
        if _is_nbgrader_test(cell):
            continue
        text = _cell_text(cell.get("source", ""), path, number)
        lines = [f"# {item}" if item.lstrip().startswith(("%", "!")) else item for item in text.splitlines()]
        chunk = "\n".join(lines)
        count = max(1, len(lines))
        places.append((line, line + count - 1, number))
        chunks.append(chunk)
        line += count + 1  # the blank line between chunks
    return Source("\n\n".join(chunks) + "\n", places)


def _cell_text(source, path: Path, number: int) -> str:
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(part, str) for part in source):
        return "".join(source)
    raise SubmissionError(f"{path.name} is not a readable notebook (code cell {number}'s source is not text).")


def _is_nbgrader_test(cell: dict) -> bool:
    """An autograder test cell: graded, and not an answer."""
    meta = cell.get("metadata")
    nbgrader = meta.get("nbgrader") if isinstance(meta, dict) else None
    return isinstance(nbgrader, dict) and nbgrader.get("grade") is True and nbgrader.get("solution") is not True
