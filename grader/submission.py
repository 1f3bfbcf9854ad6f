"""Reads a submission (.py file or .ipynb notebook) into the Python source to grade.

A notebook is graded as nbgrader runs it: every code cell that is not a test
cell, in order, with IPython magics and shell escapes commented out. The
source keeps a map from its lines back to the notebook's cells, so errors can
name the cell.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


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
    if not path.exists():
        raise SubmissionError(f"{path} does not exist.")
    if not path.is_file():
        raise SubmissionError(f"{path} is not a file.")
    data = path.read_bytes()
    if path.suffix == ".ipynb":
        return notebook_submission(data, path)
    if path.suffix != ".py":
        raise SubmissionError(f"{path.name}: a submission is a .py file or an .ipynb notebook.")
    return Source(python_source(data, path))


def read_source(path: Path) -> str:
    if not path.exists():
        raise SubmissionError(f"{path} does not exist.")
    if not path.is_file():
        raise SubmissionError(f"{path} is not a file.")
    data = path.read_bytes()
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
    return notebook_submission(data, path).text


def notebook_submission(data: bytes, path: Path) -> Source:
    """Every code cell of the notebook that is not an nbgrader test cell, in order, with IPython
    magics and shell escapes commented out, and the map of its lines to the cells."""
    try:
        notebook = json.loads(data.decode("utf-8"))
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
