"""Reads a submission (.py file or .ipynb notebook) into the Python source to grade."""

from __future__ import annotations

import json
from pathlib import Path


class SubmissionError(Exception):
    """The submission cannot be read as Python source."""


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
    for cell in answers or code:  # an nbgrader notebook: only its answer cells, not its tests
        source = cell.get("source", "")
        text = "".join(source) if isinstance(source, list) else str(source)
        lines = [f"# {line}" if line.lstrip().startswith(("%", "!")) else line for line in text.splitlines()]
        chunks.append("\n".join(lines))
    return "\n\n".join(chunks) + "\n"


def _is_nbgrader_answer(cell: dict) -> bool:
    meta = cell.get("metadata")
    nbgrader = meta.get("nbgrader") if isinstance(meta, dict) else None
    return isinstance(nbgrader, dict) and nbgrader.get("solution") is True
