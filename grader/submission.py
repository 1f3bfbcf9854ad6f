"""Reads a submission (.py file or .ipynb notebook) into the Python source to grade.

A notebook is graded on its answers, so that it gets the verdict its answer
would get as a .py file. nbgrader's metadata says which cells those are: the
cells the student was asked to fill (solution cells), and of the code cells the
student added, those the answers need (the cells defining a name the answers
use, and the cells those need in turn: helpers, imports). The notebook's
visible checks — test cells, locked read-only cells such as the released
"Check your work" cell — are the student's own tool and never run under
grading, nor do scratch cells the answers do not use. A notebook without
solution cells (not made by nbgrader) is graded whole: every code cell that is
not a test or locked cell. Cells run in the notebook's order, IPython magics
and shell escapes commented out, and so are the statements that call the
grader itself (``from grader import check; check()``: the student's own tool
too); the source keeps a map from its lines back to the notebook's code cells,
so errors can name the cell.
"""

from __future__ import annotations

import ast
import builtins
import errno
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .protocol.limits import MAX_NOTEBOOK_VALUES, MAX_SOURCE_BYTES, MAX_SUBMISSION_BYTES as MAX_BYTES


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


NBGRADER_STUDENT_FOLDERS = ("submitted", "autograded", "feedback")  # a course's folders of students' copies
NBGRADER_COURSE_FILES = ("nbgrader_config.py", "gradebook.db")  # what marks a course's own folder


def closed_around(path: Path) -> list[str]:
    """The folders no grading of the submission at ``path`` may read: its own folder (a student's
    other files) and, where it lies in an nbgrader course, the whole course (its source notebooks,
    gradebook and every student's copies): the course is the folder above a folder of students'
    copies, or the nearest folder above that holds a course's own files. Never a folder that holds
    the Python running the grader or the grader itself, which a grading must read. A single grading
    and a batch of the same course hide the same folders."""
    import sys

    path = Path(os.path.abspath(path))
    folders = [str(path.parent)]
    needed = [Path(os.path.realpath(p)) for p in (sys.prefix, sys.base_prefix, Path(__file__).parent)]
    parts = path.parts
    for index in range(len(parts) - 2, 0, -1):
        folder = Path(*parts[:index + 1])
        course = None
        if parts[index] in NBGRADER_STUDENT_FOLDERS:
            course = folder.parent
        else:
            try:
                if any((folder / name).is_file() for name in NBGRADER_COURSE_FILES):
                    course = folder
            except OSError:
                continue
        if course is not None and len(course.parts) > 1:
            real = Path(os.path.realpath(course))
            if not any(real == held or real in held.parents for held in needed):
                folders.append(str(course))
            break
    return list(dict.fromkeys(folders))


def read_submission(path: Path) -> Source:
    """The source to grade. ``path`` itself must be a regular file: a symbolic link is refused, not
    followed (it could point anywhere the grader may read, the solutions included)."""
    path = Path(path)
    data = _read_file_itself(path)
    if path.suffix == ".ipynb":
        source = notebook_submission(data, path)
    elif path.suffix != ".py":
        raise SubmissionError(f"{path.name}: a submission is a .py file or an .ipynb notebook.")
    else:
        source = Source(python_source(data, path))
    return source


def _too_much_code(name: str, size: int, what: str) -> SubmissionError:
    return SubmissionError(
        f"{name} holds {_size(size)} of {what}; a submission may hold at most "
        f"{_size(MAX_SOURCE_BYTES)} (an answer to any exercise is a few KiB), so it was not graded. "
        "Leave out what the answer does not need: pasted data, tables or outputs.")


def _size(count: int) -> str:
    return f"{count / (1024 * 1024):.1f} MiB" if count >= 1024 * 1024 else f"{-(-count // 1024)} KiB"


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
        advice = (" Clear its outputs (Jupyter: Edit, Clear Outputs of All Cells) and submit it again."
                  if path.suffix == ".ipynb" else " An answer to any exercise is a few KiB of code.")
        raise SubmissionError(f"{path.name} is larger than {MAX_BYTES // (1024 * 1024)} MiB; it is not graded.{advice}")
    return data


def python_source(data: bytes, path: Path) -> str:
    if len(data) > MAX_SOURCE_BYTES:
        raise _too_much_code(path.name, len(data), "Python")
    if b"\x00" in data:
        raise SubmissionError(f"{path.name} contains NUL bytes; it is not a Python source file.")
    try:
        return data.decode("utf-8-sig")  # a byte order mark (Notepad's UTF-8) is not part of the code
    except UnicodeDecodeError as exc:
        raise SubmissionError(
            f"{path.name} is not UTF-8 text (byte {exc.start} cannot be decoded); save it as UTF-8."
        ) from None


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def notebook_submission(data: bytes, path: Path) -> Source:
    """The code cells of the notebook that are graded (see the module's docstring), in order, with
    IPython magics and shell escapes commented out, and the map of its lines to the code cells
    (numbered among all the notebook's code cells, as Jupyter shows them)."""
    structure = _JSON_STRING.sub(b"", data)  # a copy at most as large, without the strings' text
    values = sum(structure.count(mark) for mark in (b",", b":", b"[", b"{"))  # at least the values less one
    del structure
    if values > MAX_NOTEBOOK_VALUES:
        raise SubmissionError(f"{path.name} holds more than {MAX_NOTEBOOK_VALUES:,} JSON values; it is not read as "
                              "a notebook. Clear its outputs (Jupyter: Edit, Clear Outputs of All Cells) and "
                              "submit it again.")
    try:
        notebook = json.loads(data.decode("utf-8-sig"))
        cells = notebook["cells"]
        if not isinstance(cells, list):
            raise TypeError("cells is not a list")
    except (UnicodeDecodeError, ValueError, KeyError, TypeError, RecursionError) as exc:
        raise SubmissionError(f"{path.name} is not a readable notebook ({str(exc)[:200]}).") from None
    code = [cell for cell in cells if isinstance(cell, dict) and cell.get("cell_type") == "code"]
    texts, size = [], 0
    for number, cell in enumerate(code, start=1):
        text = _cell_text(cell.get("source", ""), path, number)
        size += len(text.encode("utf-8", "surrogatepass"))
        if size > MAX_SOURCE_BYTES:
            raise _too_much_code(path.name, sum(len(_cell_text(c.get("source", ""), path, n).encode(
                "utf-8", "surrogatepass")) for n, c in enumerate(code, start=1)), "code in its code cells")
        lines = [f"# {item}" if item.lstrip().startswith(("%", "!")) else item for item in text.splitlines()]
        texts.append((number, cell_role(cell), lines))
    texts = [(number, role, lines) for (number, role, _), lines in
             zip(texts, without_the_grader([lines for _, _, lines in texts]))]
    graded = _graded_cells(texts)
    chunks, places, line = [], [], 1
    for number, _, lines in texts:
        if number not in graded:
            continue
        count = max(1, len(lines))
        places.append((line, line + count - 1, number))
        chunks.append("\n".join(lines))
        line += count + 1  # the blank line between chunks
    return Source("\n\n".join(chunks) + "\n", places)


def without_the_grader(cells: list[list[str]]) -> list[list[str]]:
    """Cells' lines, in order, with their top-level statements that use the grader commented out: an
    import of ``grader`` and what uses the names it binds, in its cell or a later one (``from grader
    import check``, ``check("exercise3")``, ``v = check()`` and what uses ``v``). The grader in a
    notebook is the student's own tool, as the visible checks are: no grading runs it, and a grading
    process could not import it. The lines stay where they were."""
    bound: set[str] = set()
    out = []
    for lines in cells:
        try:
            tree = ast.parse("\n".join(lines))
        except (SyntaxError, ValueError, RecursionError):
            out.append(lines)
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                bound.update(alias.asname or "grader" for alias in node.names if _is_grader(alias.name))
            elif isinstance(node, ast.ImportFrom) and not node.level and _is_grader(node.module or ""):
                bound.update(alias.asname or alias.name for alias in node.names)
        commented: set[int] = set()
        for statement in tree.body if bound else ():  # in order: what a commented statement binds is the grader's too
            names = [node for node in ast.walk(statement) if isinstance(node, (ast.Name, ast.alias))]
            if any((node.id if isinstance(node, ast.Name) else (node.asname or node.name).split(".")[0]) in bound
                   for node in names):
                commented.update(range(statement.lineno - 1, statement.end_lineno))
                bound.update(node.id for node in names if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load))
        out.append([f"# {line}" if index in commented else line for index, line in enumerate(lines)])
    return out


def _is_grader(module: str) -> bool:
    return module == "grader" or module.startswith("grader.")


ANSWER, TEST, LOCKED, OWN = "answer", "test", "locked", "own"


def cell_role(cell: dict) -> str:
    """What a code cell is in nbgrader's terms: an answer the student was asked to fill
    (a solution cell), an autograder test cell, a locked read-only cell (the released "Check your
    work" asserts), or a cell of the student's own (no nbgrader metadata)."""
    meta = cell.get("metadata")
    nbgrader = meta.get("nbgrader") if isinstance(meta, dict) else None
    if not isinstance(nbgrader, dict):
        return OWN
    if nbgrader.get("solution") is True:
        return ANSWER
    if nbgrader.get("grade") is True:
        return TEST
    if nbgrader.get("locked") is True:
        return LOCKED
    return OWN


BUILTINS = frozenset(dir(builtins))


def _graded_cells(cells: list[tuple[int, str, list[str]]]) -> set[int]:
    """The numbers of the code cells to grade: the answers and the cells of the student's own they
    need; in a notebook without answers, every cell of the student's own. Each name is looked up
    once and each cell added once: linear in the notebook."""
    own = [number for number, role, _ in cells if role == OWN]
    answers = [number for number, role, _ in cells if role == ANSWER]
    if not answers:
        return set(own)
    facts = {number: _names("\n".join(lines)) for number, role, lines in cells if role in (OWN, ANSWER)}
    definers: dict[str, list[int]] = {}
    for number in own:
        for name in (facts[number] or (set(),))[0]:
            definers.setdefault(name, []).append(number)
    graded, defined, wanted, looked_up = set(), set(), [], set()

    def grade_cell(number: int) -> None:
        graded.add(number)
        if facts[number] is not None:
            defined.update(facts[number][0])
            wanted.extend(facts[number][1])

    def resolve() -> set[str]:
        """Add the cells defining the names wanted; the names no graded cell defines."""
        missing = set()
        while wanted:
            name = wanted.pop()
            if name in BUILTINS or name in looked_up or name in defined:
                continue
            looked_up.add(name)
            for number in definers.get(name, ()):
                if number not in graded:
                    grade_cell(number)
        for name in looked_up:
            if name not in defined and name not in BUILTINS:
                missing.add(name)
        return missing

    for number in answers:
        grade_cell(number)
    missing = resolve()
    if missing:
        for number in own:  # a star import may define them
            if number not in graded and facts[number] is not None and facts[number][2]:
                grade_cell(number)
        missing = resolve()
    if missing:
        # a cell that is not Python (a typo, IPython's `obj?`) cannot say what it defines: it is graded
        # when a name the graded cells use is defined nowhere else, so that its own error is reported
        graded.update(number for number in own if facts[number] is None)
    return graded


def _names(text: str) -> tuple[set[str], set[str], bool] | None:
    """(the names a cell binds at its top level, the names it reads without binding them anywhere
    in it, whether it star-imports), or None when it is not Python."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError):
        return None
    defined, star = set(), False
    nodes = list(tree.body)
    while nodes:  # the top level only: not into a function, class, lambda or comprehension
        node = nodes.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            defined.add(node.name)
            nodes.extend(node.decorator_list)
            continue
        if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            star = star or any(alias.name == "*" for alias in node.names)
            defined |= {alias.asname or alias.name.split(".")[0] for alias in node.names if alias.name != "*"}
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            defined.add(node.id)
        nodes.extend(ast.iter_child_nodes(node))
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.alias):
            bound.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    used = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}
    return defined, used - bound, star


def _cell_text(source, path: Path, number: int) -> str:
    if isinstance(source, str):
        return source
    if isinstance(source, list) and all(isinstance(part, str) for part in source):
        return "".join(source)
    raise SubmissionError(f"{path.name} is not a readable notebook (code cell {number}'s source is not text).")
