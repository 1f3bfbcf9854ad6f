"""Generates the student's stubs from the solutions (the single source of truth).

Solutions that build on earlier exercises carry those exercises' reference
layers between ``# BEGIN PROVIDED LAYERS`` and ``# END PROVIDED LAYERS``;
this module writes that block too, from the earlier solutions.

Every region between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` is
replaced, at its indentation, by the stub nbgrader itself writes
(``# YOUR CODE HERE`` / ``raise NotImplementedError()``); signatures,
docstrings and everything outside the markers are kept.

The developer command that writes them into the repository is ``python -m tools.generate``.
"""

from __future__ import annotations

import re

from .. import exercises

BEGIN = re.compile(r"^(?P<indent>[ \t]*)### BEGIN SOLUTION[ \t]*$")
END = re.compile(r"^[ \t]*### END SOLUTION[ \t]*$")
STUB_LINES = ("# YOUR CODE HERE", "raise NotImplementedError()")


PROVIDED_BEGIN = "# BEGIN PROVIDED LAYERS"
PROVIDED_END = "# END PROVIDED LAYERS"
# exercise -> the exercises whose reference layers its solution carries
REGISTER = '@keras.saving.register_keras_serializable(package="transformer_exercises")'


class MarkerError(ValueError):
    """The solution's markers are unbalanced."""


def make_stub(solution: str) -> str:
    out: list[str] = []
    inside_from: int | None = None
    for number, line in enumerate(solution.splitlines(keepends=True), start=1):
        begin, end = BEGIN.match(line.rstrip("\n")), END.match(line.rstrip("\n"))
        if begin:
            if inside_from is not None:
                raise MarkerError(f"line {number}: BEGIN SOLUTION inside the region opened at line {inside_from}")
            inside_from = number
            out.extend(f"{begin.group('indent')}{stub}\n" for stub in STUB_LINES)
        elif end:
            if inside_from is None:
                raise MarkerError(f"line {number}: END SOLUTION without BEGIN SOLUTION")
            inside_from = None
        elif inside_from is None:
            out.append(line)
    if inside_from is not None:
        raise MarkerError(f"line {inside_from}: BEGIN SOLUTION is never closed")
    return "".join(out)


def reference_layers(solution: str) -> str:
    """A solution's classes, solved, markers dropped, registered for .keras loading."""
    lines = solution.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith("class "))
    kept = []
    for line in lines[start:]:
        bare = line.rstrip("\n")
        if BEGIN.match(bare) or END.match(bare):
            continue
        if line.startswith("class "):
            kept.append(REGISTER + "\n")
        kept.append(line)
    return "".join(kept).strip("\n") + "\n"


def with_provided_layers(solution: str, sources: list[str]) -> str:
    """``solution`` with the block between the PROVIDED markers rewritten from ``sources``."""
    before, found, rest = solution.partition(PROVIDED_BEGIN)
    if not found:
        raise MarkerError(f"no '{PROVIDED_BEGIN}' line")
    header, found, after = rest.partition(PROVIDED_END)
    if not found:
        raise MarkerError(f"no '{PROVIDED_END}' line")
    first_line = header.split("\n", 1)[0]
    body = "\n\n".join(reference_layers(source) for source in sources)
    return f"{before}{PROVIDED_BEGIN}{first_line}\n\n\n{body}\n\n{PROVIDED_END}{after}"


def expected_solution(exercise) -> str:
    """The solution as it must read: its provided layers up to date."""
    text = exercise.solution.read_text(encoding="utf-8")
    if exercise.provided:
        sources = [exercises.get(i).solution.read_text(encoding="utf-8") for i in exercise.provided]
        text = with_provided_layers(text, sources)
    return text


def fresh_stub(exercise) -> str:
    """The stub of ``exercise`` as generated from its solution: what a student starts from."""
    return make_stub(expected_solution(exercise))


def edited_stubs() -> list:
    """The exercises whose file in ``exercises/`` (or, in an installed package, ``_exercises/``)
    is not their stub as generated: a working copy someone edited, or solved."""
    edited = []
    for exercise in exercises.EXERCISES.values():
        try:
            current = exercise.stub.read_text(encoding="utf-8")
        except (FileNotFoundError, UnicodeDecodeError):
            current = None
        if current != fresh_stub(exercise):
            edited.append(exercise)
    return edited
