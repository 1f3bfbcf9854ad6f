"""Reading a results folder of ``grade batch`` (or ``grade merge``) back into plain data, and
writing its files whole (``replace_file``).

A results folder holds ``verdicts.jsonl``, ``summary.csv`` (for each grading's seconds) and, from
runs that finished, ``run.json`` (``grader.integrations.shards``). ``read_results`` gives a ``ClassResults``:
what the class report (``grader.integrations.class_report``) is drawn from, with nothing computed yet. It reads
no submission: only what the grader wrote.
"""

from __future__ import annotations

import csv
import json
import os
from dataclasses import dataclass, field
from pathlib import Path


MANIFEST = "run.json"  # written by a run that finished (``grader.integrations.shards``)
STARTED = "run.started.json"  # the manifest of a run under way, replaced by run.json (``grader.integrations.outputs``)


def printable(value: str) -> str:
    """A file name that is not UTF-8 (Python keeps its bytes as surrogates), with those bytes escaped."""
    return value.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace") if isinstance(value, str) \
        else value


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def cell(text: str) -> str:
    """A CSV cell a spreadsheet shows as the text it is: one that would start a formula (= + - @,
    or a tab or carriage return before one) gets a leading apostrophe, as spreadsheets write it."""
    return "'" + text if text.startswith(FORMULA_STARTS) else text


def replace_file(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: a kill or a power cut leaves the old file or
    the new one, never a part of either."""
    path = Path(path)
    temporary = path.with_name(f".{path.name}.new")
    with open(temporary, "w", encoding="utf-8", newline="", errors="backslashreplace") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)
    _sync_folder(path.parent)


def _sync_folder(folder: Path) -> None:
    descriptor = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


class ResultsError(ValueError):
    """A folder that is not results of ``grade batch``; the message says what is wrong."""


@dataclass
class ClassResults:
    folder: str
    verdicts: list[dict]  # the lines of verdicts.jsonl, sorted by id
    seconds: dict[str, float] = field(default_factory=dict)  # id -> seconds of its grading (summary.csv)
    manifest: dict | None = None  # run.json, or None for a run that did not finish


def read_results(folder: Path) -> ClassResults:
    folder = Path(folder)
    if not folder.is_dir():
        raise ResultsError(f"{folder} is not a folder" if folder.exists() else f"{folder} does not exist")
    path = folder / "verdicts.jsonl"
    if not path.is_file():
        raise ResultsError(f"{folder} has no verdicts.jsonl: it is not a results folder of grade batch")
    verdicts = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict) or not isinstance(record.get("id"), str):
                raise ValueError("no id")
        except ValueError:
            raise ResultsError(f"{path}, line {number}, is not a verdict of grade batch") from None
        record.setdefault("checks", [])
        verdicts.append(record)
    verdicts.sort(key=lambda record: record["id"])
    by_cell = {cell(printable(record["id"])): record["id"] for record in verdicts}
    seconds = {}
    try:
        with open(folder / "summary.csv", encoding="utf-8", newline="") as handle:
            for row in csv.DictReader(handle):
                if row.get("id") in by_cell:
                    try:
                        seconds[by_cell[row["id"]]] = float(row.get("seconds") or "")
                    except ValueError:
                        pass
    except FileNotFoundError:
        pass
    manifest = None
    if (folder / MANIFEST).is_file():
        try:
            manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        except ValueError:
            manifest = None
        if not isinstance(manifest, dict):
            manifest = None
    return ClassResults(str(folder), verdicts, seconds, manifest)
