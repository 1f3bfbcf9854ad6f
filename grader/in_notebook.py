"""The grader where students work: ``check()`` in a notebook shows the report of ``grade`` in the cell.

``from grader import check; check("exercise3")`` grades the class the notebook defined, as
``grade --submission`` grades a file: the notebook file the kernel runs (found by the name
Jupyter's server, VS Code or nbgrader give it), read as ``grade`` reads a notebook; or, where
there is no saved file (Colab) or the file does not hold the answer the kernel last ran (not saved
since), the cells the kernel executed (``grader.notebook``, which the course's hidden test cells
use). The grading runs in a confined child process, never in the kernel, and what it or its
processes write to the kernel's stdout and stderr is kept out of the cell. The report is
``grader.report``'s, drawn by Rich as HTML for the notebook and as text for a plain-text
frontend, with the call that checks again where the terminal's report names a command;
``check(hint=True)`` adds the next hint for the first problem (``grader.student.hints``), a
more detailed one each time. ``check()`` returns the Verdict (``check().score``).
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import io
import os
import sys
import warnings
from pathlib import Path

from . import exercises
from .verdict import Verdict

WIDTH = 100  # columns of the report in a cell
EXECUTED = "the cells this kernel ran"  # what the report names as the submission, graded from the history
HTML_FORMAT = ('<pre style="white-space:pre;overflow-x:auto;line-height:1.25;font-size:13px;'
               "font-family:Menlo,'DejaVu Sans Mono',consolas,'Courier New',monospace\">{code}</pre>")


class CheckError(Exception):
    """``check`` cannot grade: the message says why and what to do. A notebook shows the message
    alone, without the frames of the cell and the grader."""

    def _render_traceback_(self) -> list[str]:  # IPython shows these lines instead of a traceback
        return str(self).splitlines()


class NotebookVerdict(Verdict):
    """A Verdict shown in a notebook: its report as HTML where the frontend draws it, as text where
    it does not (and as its ``repr``). ``check`` shows it once; shown again when asked for later."""

    report_text: str = ""
    report_html: str = ""
    shown_in: int | None = None  # the execution that already showed it

    def __repr__(self) -> str:
        return self.report_text

    def _repr_html_(self) -> str:
        return self.report_html

    def bundle(self) -> dict:
        return {"text/plain": self.report_text, "text/html": self.report_html}

    def _ipython_display_(self) -> None:
        from IPython import get_ipython
        from IPython.display import display

        shell = get_ipython()
        if shell is not None and self.shown_in == shell.execution_count:
            return  # check() showed it in this cell already: once is enough
        display(self.bundle(), raw=True)


def check(exercise: "str | int | None" = None, *, hint: bool = False) -> NotebookVerdict:
    """Grade this notebook's answer to ``exercise`` (by default, the exercise whose class the
    notebook defines), show the report in the cell, and return the verdict."""
    try:
        from IPython import get_ipython
    except ImportError:  # no Jupyter here at all: IPython comes with every notebook's kernel
        get_ipython = type(None)
    shell = get_ipython()
    if shell is None:
        raise CheckError("check() grades the notebook it runs in. In a terminal, grade a file: "
                         "grade exercise3 --submission exercise3.py")
    notebook = kernel_notebook(shell.user_ns)
    chosen = choose_exercise(exercise, notebook)
    source, note = what_to_grade(chosen, notebook)
    with quiet():
        from .notebook import verdict_for

        verdict = verdict_for(chosen.id, source)
    shown = NotebookVerdict(**{f.name: getattr(verdict, f.name) for f in dataclasses.fields(Verdict)})
    shown.submission = str(source) if isinstance(source, Path) else EXECUTED
    call = f'check("{chosen.id}")'
    shown.report_text, shown.report_html = drawn(shown, call, note, hint)
    from IPython.display import display

    display(shown.bundle(), raw=True)
    shown.shown_in = shell.execution_count
    return shown


# --------------------------------------------------------------------------- what to grade


def kernel_notebook(namespace: dict) -> Path | None:
    """The notebook file this kernel runs, where its frontend says: VS Code's ``__vsc_ipynb_file__``,
    or Jupyter's server's session (``JPY_SESSION_NAME``, which ipykernel keeps as ``__session__``).
    None where none is known (Colab, nbclient, a renamed notebook's old name): ``graded_source``
    then looks in the kernel's folder."""
    for name in ("__vsc_ipynb_file__", "__session__"):
        value = namespace.get(name) or (os.environ.get("JPY_SESSION_NAME") if name == "__session__" else None)
        if isinstance(value, str) and value.endswith(".ipynb"):
            path = Path(value).expanduser()
            if path.is_file():
                return path
    return None


def what_to_grade(exercise, notebook: Path | None) -> tuple["str | Path", str]:
    """The notebook file to grade, or the executed cells' source; and a note to show above the
    report when the file is not what the kernel ran (not saved since the answer cell last ran)."""
    from .notebook import answer_source, executed_cells, executed_source, graded_source

    try:
        source = graded_source(exercise.id, exercise.target, notebook)
    except AssertionError:
        raise CheckError(f"This notebook defines no {exercise.target}: run the cell that defines it, "
                         "then check again.") from None
    if not isinstance(source, Path):
        return source, ""
    try:
        last = _definition(answer_source(exercise.target, executed_cells()), exercise.target)
    except AssertionError:  # the kernel has not run the answer: the file is the answer
        return source, ""
    from .submission import SubmissionError, read_submission

    try:
        saved = read_submission(source).text
    except SubmissionError:
        return source, ""
    if _normalised(last) in _normalised(saved):
        return source, ""
    return executed_source(exercise.id, exercise.target), (
        f"{source.name} on disk does not hold the {exercise.target} this kernel last ran (it was not saved "
        "since): graded the cells this kernel ran. Save the notebook to grade the file.")


def _definition(cell: str, target: str) -> str:
    """The text of ``target``'s last top-level definition in ``cell`` (which defines it)."""
    tree = ast.parse(cell)
    node = [n for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == target][-1]
    lines = cell.splitlines()
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    return "\n".join(lines[first - 1:node.end_lineno])


def _normalised(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def defined_names(notebook: Path | None) -> set[str]:
    """The classes and functions the notebook defines at top level: in its file's graded cells, and
    in the cells the kernel executed."""
    from .notebook import executed_cells
    from .submission import SubmissionError, read_submission

    texts = []
    if notebook is not None:
        with contextlib.suppress(SubmissionError):
            texts.append(read_submission(notebook).text)
    with contextlib.suppress(AssertionError):
        texts += executed_cells()
    names = set()
    for text in texts:
        try:
            tree = ast.parse(text)
        except (SyntaxError, ValueError, RecursionError):
            continue
        names.update(node.name for node in tree.body if isinstance(node, (ast.ClassDef, ast.FunctionDef)))
    return names


def choose_exercise(asked: "str | int | None", notebook: Path | None):
    """The exercise asked for (its id or number), or the one whose class the notebook defines;
    where the notebook defines none, or the classes of several, a CheckError lists the choices."""
    listing = ", ".join(f"{e.id} ({e.target})" for e in exercises.EXERCISES.values())
    if asked is not None:
        for name in (str(asked), f"exercise{asked}"):
            if name in exercises.EXERCISES:
                return exercises.get(name)
        raise CheckError(f"There is no exercise {asked!r}. The exercises: {listing}.")
    names = defined_names(notebook)
    found = [e for e in exercises.EXERCISES.values() if e.target in names]
    # exercise 5's answer carries the layers of 1 and 3: their classes are not the notebook's answer
    provided = {exercises.get(earlier).target for e in found for earlier in e.provided}
    found = [e for e in found if e.target not in provided]
    if len(found) > 1 and notebook is not None:
        named = [e for e in found if e.id == notebook.stem]  # exercise3.ipynb answers exercise3
        found = named or found
    if len(found) > 1 and len({e.target for e in found}) == 1:  # the two editions' classes of one name
        found = _by_signature(found) or found
    if len(found) == 1:
        return found[0]
    if not found:
        raise CheckError(f"This notebook defines none of the exercises' classes: run the cell that defines yours, "
                         f'or name the exercise, e.g. check("exercise3"). The exercises: {listing}.')
    raise CheckError(f"This notebook defines the class of several exercises: "
                     f"{', '.join(f'{e.id} ({e.target})' for e in found)}. "
                     f'Name the one to grade, e.g. check("{found[0].id}").')


def _by_signature(candidates) -> list:
    """Of exercises whose classes share a name (the two editions'), those whose stub's constructor
    takes the parameters the notebook's last definition of the class takes."""
    from .notebook import answer_source, executed_cells

    chosen = []
    for exercise in candidates:
        try:
            mine = _parameters(answer_source(exercise.target, executed_cells()), exercise.target)
            stub = _parameters(exercise.stub.read_text(encoding="utf-8"), exercise.target)
        except (AssertionError, OSError):
            continue
        if mine is not None and mine == stub:
            chosen.append(exercise)
    return chosen


def _parameters(source: str, target: str) -> tuple[str, ...] | None:
    """The parameter names of ``target``'s constructor (a class's ``__init__``) or of the function."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError):
        return None
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == target:
            return tuple(a.arg for a in node.args.args)
        if isinstance(node, ast.ClassDef) and node.name == target:
            for item in node.body:
                if isinstance(item, ast.FunctionDef) and item.name == "__init__":
                    return tuple(a.arg for a in item.args.args[1:])
    return None


# --------------------------------------------------------------------------- the grading, quiet


@contextlib.contextmanager
def quiet():
    """Nothing the grading writes reaches the cell: Python's warnings, ``sys.stdout`` and
    ``sys.stderr``, and the kernel's own descriptors 1 and 2, which the processes it starts inherit
    (a kernel copies what is written to them into the cell)."""
    saved = []
    with open(os.devnull, "w") as sink, warnings.catch_warnings(), \
            contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            for fd in (1, 2):
                with contextlib.suppress(OSError):
                    _flush(fd)
                    saved.append((fd, os.dup(fd)))
                    os.dup2(sink.fileno(), fd)
            yield
        finally:
            for fd, copy in saved:
                os.dup2(copy, fd)
                os.close(copy)


def _flush(fd: int) -> None:
    for stream in (sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            if stream is not None and stream.fileno() == fd:
                stream.flush()


# --------------------------------------------------------------------------- the report


def drawn(verdict: Verdict, call: str, note: str = "", hint: bool = False) -> tuple[str, str]:
    """The report (``grader.report.render``) as text and as HTML, ``note`` above it, the next hint
    below it when asked for."""
    from rich.console import Console, Group
    from rich.text import Text

    from .exercises import tracks
    from .report import render

    parts = [Text(note, style="yellow"), Text("")] if note else []
    parts.append(render(verdict, next_step=tracks.next_step(verdict.exercise), notebook_call=call))
    if hint:
        parts.append(next_hint(verdict))
    console = Console(record=True, file=io.StringIO(), width=WIDTH, force_terminal=True, force_jupyter=False,
                      color_system="truecolor", legacy_windows=False)
    console.print(Group(*parts))
    text = "\n".join(line.rstrip() for line in console.export_text(clear=False).splitlines())
    return text, console.export_html(inline_styles=True, code_format=HTML_FORMAT)


def next_hint(verdict: Verdict):
    """The hint ``grade hint`` would give for this verdict: for the first cause still failing, the
    least revealing of its hints not yet shown (the next one each time), else the exercise's next."""
    from rich.text import Text

    from .causes import root_causes
    from .report import hint_panel
    from .student import progress
    from .student.hints import choose, read_tagged_hints

    exercise = exercises.get(verdict.exercise)
    if verdict.status == "passed":
        return Text("Every check passes: no hint needed.", style="green")
    hints = read_tagged_hints(exercise.hints)
    causes = root_causes(verdict.checks) if verdict.status != "error" else []
    if causes:
        ids = [c.id for c in causes[0].checks]
        chosen = choose(hints, ids, progress.next_cause_hint(exercise.id, causes[0].root.id))
        if chosen is not None:
            return hint_panel(exercise.id, chosen[0], len(hints), causes[0].root.id)
    index = progress.next_hint(exercise.id, len(hints))
    return hint_panel(exercise.id, hints[index], len(hints))
