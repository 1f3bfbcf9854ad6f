"""Generates the student's stubs from the solutions (the single source of truth).

Every region between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` is
replaced, at its indentation, by the stub nbgrader itself writes
(``# YOUR CODE HERE`` / ``raise NotImplementedError()``); signatures,
docstrings and everything outside the markers are kept.

    python -m grader.stubs          # rewrite exercises/*.py from solutions/*.py
    python -m grader.stubs --check  # exit 1 if a committed stub has drifted
"""

from __future__ import annotations

import argparse
import re
import sys

from . import exercises

BEGIN = re.compile(r"^(?P<indent>[ \t]*)### BEGIN SOLUTION[ \t]*$")
END = re.compile(r"^[ \t]*### END SOLUTION[ \t]*$")
STUB_LINES = ("# YOUR CODE HERE", "raise NotImplementedError()")


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.stubs", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="report drifted stubs instead of rewriting them")
    args = parser.parse_args(argv)
    drifted = []
    for exercise in exercises.EXERCISES.values():
        stub = make_stub(exercise.solution.read_text(encoding="utf-8"))
        current = exercise.stub.read_text(encoding="utf-8") if exercise.stub.exists() else None
        if current == stub:
            continue
        if args.check:
            drifted.append(str(exercise.stub))
        else:
            exercise.stub.write_text(stub, encoding="utf-8")
            print(f"wrote {exercise.stub}")
    if drifted:
        print("stubs out of date with their solutions (run python -m grader.stubs):", *drifted, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
