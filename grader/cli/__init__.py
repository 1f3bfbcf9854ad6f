"""The ``grade`` command: thin wrappers over the grading API, the report and the student tools.

    grade EXERCISE [--submission PATH] [--json] [--watch] [--seed N] [--timeout S] [--memory MB]
                   [--gradescope-results FILE] [--gradescope-visibility V] [--prairielearn-results FILE]
    grade init [DIR] [--edition 2|3] [--force]
    grade list [--json] [--edition 2|3]
    grade hint [EXERCISE] [--all] [--reset]
    grade nbgrader-course DIR [--exercises EXERCISE... | --edition 2|3] [--force]
    grade batch [PATH...] --exercise EXERCISE --out DIR [--shard K/N] [...]
    grade merge OUT... --out DIR [--force]
    grade class-report OUT...
    grade gradescope-autograder EXERCISE --out ZIP [--visibility V] [--timeout S] [--memory MB]
    grade sample-class DIR [--exercise EXERCISE] [--force]
    grade explain exercise3 [--submission PATH] [--seed N] [--json]

``main`` dispatches through the table in ``commands``; each command group is a module: ``grading``
(grade, --watch), ``student`` (init, list, hint), ``classes`` (the instructor's commands),
``explain``, with what they share in ``common``.
"""

from __future__ import annotations

import importlib
import os
import sys
from pathlib import Path

from .. import exercises
from ..verdict import EXIT_ERROR
from .commands import COMMANDS


def command(name: str):
    """The function that runs the command ``name`` of the table (its module imported now)."""
    module, function = COMMANDS[name]
    return getattr(importlib.import_module(f"grader.cli.{module}"), function)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:  # where you stand, and what to do next
        return command("list")([])
    if argv[0] in COMMANDS:
        return command(argv[0])(argv[1:])
    from .common import exercise_choice
    from .grading import grade_parser, grade_command

    if _mistyped_command(argv[0]):  # before the arguments meant for that command are refused
        exercise_choice(grade_parser(), argv[0], commands=True)
    return grade_command(argv)


def _mistyped_command(value: str) -> bool:
    """``value`` names no exercise, number or file, and is near a command's name."""
    from .common import nearest

    path = Path(value)
    return not (value.startswith("-") or value.isdigit() or value in exercises.EXERCISES
                or path.suffix in (".py", ".ipynb") or path.exists()) and bool(nearest(value, COMMANDS))


def _terminated(signum, _frame) -> None:
    """SIGTERM (a job scheduler's stop, kill) or SIGHUP (the terminal closed): leave as from Ctrl-C,
    so every grading process is ended and every scratch folder and control group removed on the way
    out."""
    raise SystemExit(128 + signum)


def entry_point() -> None:
    import signal

    for stop in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(stop) is not signal.SIG_IGN:  # nohup's choice stays
            signal.signal(stop, _terminated)
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(EXIT_ERROR)
    except BrokenPipeError:
        # the reader of our output went away (grade ... | head): not an error of grading
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(EXIT_ERROR)
