"""The grader inside a notebook: what the hidden test cells of the nbgrader course call.

A test cell of the course ends with ``assert_topic("exercise3", "mask")``. It
grades what ``grade`` grades for this notebook — the notebook nbgrader is
running (in the kernel's folder), read as ``grade`` reads it: its answer cells
and the cells of the student's own they use, never the visible checks
(``grader.submission``); or, without the notebook file, the code the kernel
executed but for the test cells and the released "Check your work" cell — in a
child process, once per kernel and answer. The cell prints the topic's points
first, then each check of the topic with its points and the message of every
check that did not pass, and returns the points the topic earned as a plain
float. The cell ends with that number, so nbgrader scores the cell by it
(partial credit): the cells of a notebook add up to ``grade``'s score of the
same answer. A topic that earned nothing, or an answer that could not be
graded, raises AssertionError instead (0 points either way, and the feedback
shows it as a failure): its traceback is the message alone, since the frames of
the test cell and the grader say nothing to the student. Everything a cell
shows is wrapped at ``WIDTH`` columns, as nbgrader's feedback page shows text
unwrapped.

nbgrader gives 0 points to a test cell with any stderr output, and the student's
code runs in the same kernel: while it grades, ``assert_topic`` keeps Python
warnings and writes to ``sys.stderr`` out of the cell, so an answer that logs
or warns loses nothing.
"""

from __future__ import annotations

import ast
import contextlib
import io
import tempfile
import textwrap
import warnings
from pathlib import Path

from . import exercises
from .protocol.text import REASON, shown, shown_verdict

_VERDICTS: dict[tuple[str, str], object] = {}
WIDTH = 88  # columns of a cell's output: nbgrader's feedback shows it in a <pre>, unwrapped


def answer_source(target: str, history: list[str]) -> str:
    """The last executed cell that defines ``target`` at top level."""
    for source in reversed(history):
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == target:
                return source
    raise AssertionError(f"No cell of this notebook defines {target}: run the answer cell before the tests.")


def graded_source(exercise_id: str, target: str, notebook: "Path | None" = None) -> "str | Path":
    """What ``grade`` would grade for this notebook: the notebook file — ``notebook``, the kernel's
    own when it is known (``grader.in_notebook`` finds it), else one in the kernel's folder, where
    nbgrader runs it — that defines ``target``; else the cells the kernel executed
    (``executed_source``)."""
    from .submission import SubmissionError, read_submission

    here = Path.cwd()
    candidates = ([notebook] if notebook is not None else []) + [here / f"{exercise_id}.ipynb"] + \
        sorted(here.glob("*.ipynb"))
    for path in candidates:
        if path.is_file() and not path.is_symlink():
            try:
                source = read_submission(path).text
            except SubmissionError:
                continue
            if _defines(source, target):
                return path
    return executed_source(exercise_id, target)


def executed_source(exercise_id: str, target: str) -> str:
    """The cells the kernel executed up to the last that defines ``target``, but for the test cells
    and the released "Check your work" cell, with the statements that call the grader and IPython's
    magics (which the kernel's history holds as calls of get_ipython()) commented out, as a
    notebook's are (``grader.submission``)."""
    from .submission import without_the_grader

    history = executed_cells()
    answer = answer_source(target, history)
    index = max(i for i, cell in enumerate(history) if cell == answer)
    check = exercises.get(exercise_id).notebook.check_cell(exercise_id).strip()
    cells = [cell for cell in history[:index + 1]
             if cell and "assert_topic(" not in cell and cell.strip() != check]
    magics = [[f"# {line}" if line.lstrip().startswith("get_ipython()") else line for line in cell.splitlines()]
              for cell in cells]
    return "\n\n".join("\n".join(lines) for lines in without_the_grader(magics)) + "\n"


def _defines(source: str, target: str) -> bool:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return True  # grade reports the syntax error: so does the notebook
    return any(isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == target for node in tree.body)


def executed_cells() -> list[str]:
    """The cells this kernel executed, in order (IPython's ``In``)."""
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        raise AssertionError("The grader's notebook functions run inside a Jupyter notebook.")
    return list(shell.user_ns.get("In", []))


def verdict_for(exercise_id: str, source: "str | Path"):
    """The verdict of a notebook file (graded as ``grade --submission`` grades it) or of source
    text; once per content."""
    from .api import grade

    if isinstance(source, Path):
        key = (exercise_id, source.read_bytes())
        if key not in _VERDICTS:
            _VERDICTS[key] = grade(exercise_id, source)
        return _VERDICTS[key]
    key = (exercise_id, source)
    if key not in _VERDICTS:
        with tempfile.TemporaryDirectory(prefix="grade-notebook-") as folder:
            path = Path(folder) / f"{exercise_id}.py"
            path.write_text(source, encoding="utf-8")
            _VERDICTS[key] = grade(exercise_id, path)
    return _VERDICTS[key]


def assert_topic(exercise_id: str, topic: str) -> float:
    """Grade the executed answer (once per kernel) and return the points ``topic`` earned;
    raise AssertionError when it earned none."""
    exercise = exercises.get(exercise_id)
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        verdict = verdict_for(exercise_id, graded_source(exercise_id, exercise.target))
    lines, failure, points = topic_report(verdict, topic)
    if lines:
        print(printed(lines))  # one write: one stream output, as grade batch --gradebook writes it
    if failure is not None:
        error = AssertionError(failure)
        # IPython shows an exception with this method by the lines it returns instead of a traceback
        error._render_traceback_ = lambda: failure_traceback(failure)
        raise error
    return points


def wrapped(text: str, width: int = WIDTH) -> list[str]:
    """The lines of ``text``, each longer than ``width`` wrapped at word boundaries under its own
    indentation; shorter lines (code, pictures of masks) are left as they are."""
    out = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        indent = line[:len(line) - len(line.lstrip())][:width // 2]
        out += textwrap.wrap(line.strip(), width, initial_indent=indent, subsequent_indent=indent + "  ",
                             break_on_hyphens=False) or [""]
    return out


def printed(lines: list[str]) -> str:
    """What a test cell prints: ``topic_report``'s lines, wrapped."""
    return "\n".join(wrapped("\n".join(lines)))


def failure_traceback(failure: str) -> list[str]:
    """The traceback a failed test cell shows: the message, wrapped, one entry per line."""
    return wrapped(failure)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def told_details(failed, messages: dict[str, str]) -> list[str]:
    """What a cell says of each check of its topic that did not pass: its title, id, status and
    message; checks skipped for one reason (a crash keeps every later check from running) are told
    in one line, by the terminal report's rule (``grader.report``: the reason said once, the checks
    named, or past a few counted)."""
    from .report import Shown, unchecked_words

    shown, details = Shown(), []
    for c in failed:
        message = messages.get(c.id, c.message)
        if c.status != "skipped":
            details.append(f"{c.title} ({c.id}, {c.status}):\n{message}")
        elif shown.first_skip(message):
            same = [d for d in failed if d.status == "skipped" and messages.get(d.id, d.message) == message]
            details.append(f"{c.title} ({c.id}, skipped):\n{message}" if len(same) == 1 else
                           f"{unchecked_words(same)}: {message}")
    return details


def topic_report(verdict, topic: str) -> tuple[list[str], str | None, float]:
    """What a test cell of ``topic`` prints for this verdict (unwrapped), the failure it raises
    (None unless the topic earned nothing; then it says everything and nothing is printed) and the
    points it returns. Either leads with the topic's points. ``grade batch --gradebook`` writes the
    same as cell outputs. Nbgrader's feedback shows them to the student: every text is ``shown``
    (why the answer could not be graded, as Gradescope's always-visible test says it)."""
    verdict = shown_verdict(verdict)
    if verdict.status == "error":
        return [], shown(f"Your answer could not be graded: {verdict.error}", REASON), 0.0
    checks = [c for c in verdict.checks if c.topic == topic]
    if not checks:
        return [], f"The grader has no {topic} checks for {verdict.exercise}.", 0.0
    points = round(sum(c.points for c in checks), 6)
    max_points = round(sum(c.max_points for c in checks), 6)
    lines = [f"{'✓' if c.status == 'passed' else '✗'} {c.title} ({c.id}): {c.points:g}/{c.max_points:g}"
             for c in checks]
    failed = [c for c in checks if c.status != "passed"]
    from .causes import told_once

    messages = told_once(verdict.checks)  # each cause once, however many checks and cells it fails
    details = told_details(failed, messages)
    summary = f"{topic}: {points:g} of {max_points:g} points"
    if failed and points == 0:  # all of it in the failure, which the feedback shows after any output
        return [], "\n\n".join([f"{summary}; {len(failed)} of {_plural(len(checks), 'check')} did not pass.",
                                 "\n".join(lines), *details]), 0.0
    if failed:
        lines += [""] + "\n\n".join(details).splitlines()
    return [summary, ""] + lines, None, float(points)
