"""The ``grade`` command: a thin wrapper over grading.grade and the report.

    grade EXERCISE [--submission PATH] [--json] [--seed N] [--timeout S] [--memory MB]
    grade list [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from . import exercises
from .verdict import EXIT_ERROR

USAGE = """\
grade EXERCISE [--submission PATH] [--json] [--seed N] [--timeout SECONDS] [--memory MB]
       grade list [--json]"""

DESCRIPTION = """\
Grade your Transformer exercises. `grade exercise3` grades your working copy of
exercises/exercise3.py and shows what passed, what failed and why.
`grade list` lists the exercises."""

EPILOG = """\
exit codes: 0 every check passed, 1 some check failed, 2 the submission could not be graded.
environment: GRADE_TIMEOUT and GRADE_MEMORY_MB set the defaults of --timeout and --memory."""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "list":
        return list_command(argv[1:])
    return grade_command(argv)


def _grade_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grade", usage=USAGE, description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("exercise", help=f"the exercise to grade: {', '.join(exercises.EXERCISES)}; or `list`")
    parser.add_argument("--submission", type=Path, metavar="PATH",
                        help="grade this .py file or .ipynb notebook instead of your working copy")
    parser.add_argument("--json", action="store_true", help="print only the JSON verdict on stdout")
    parser.add_argument("--seed", type=int, default=None, help="seed of the generated inputs (default 0)")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help="wall-clock limit for running the submission (default 120)")
    parser.add_argument("--memory", type=int, default=None, metavar="MB",
                        help="memory limit of the process running the submission (default 4096)")
    return parser


def resolve_settings(args, parser):
    """Each setting from its flag, else its environment variable, else the default;
    a bad value is reported with where it came from."""
    from .grading import DEFAULT_MEMORY_MB, DEFAULT_SEED, DEFAULT_TIMEOUT, Settings

    def pick(flag_value, env_name, default, convert, minimum, flag):
        if flag_value is not None:
            value, source = flag_value, flag
        elif os.environ.get(env_name):
            source = f"environment variable {env_name}"
            try:
                value = convert(os.environ[env_name])
            except ValueError:
                parser.error(f"{source}={os.environ[env_name]!r} is not a number")
        else:
            return default
        if value < minimum:
            parser.error(f"{source} must be at least {minimum}, got {value}")
        return value

    return Settings(
        seed=pick(args.seed, "GRADE_SEED", DEFAULT_SEED, int, 0, "--seed"),
        timeout=pick(args.timeout, "GRADE_TIMEOUT", DEFAULT_TIMEOUT, float, 1, "--timeout"),
        memory_mb=pick(args.memory, "GRADE_MEMORY_MB", DEFAULT_MEMORY_MB, int, 512, "--memory"),
    )


def grade_command(argv: list[str]) -> int:
    parser = _grade_parser()
    args = parser.parse_args(argv)
    if args.exercise not in exercises.EXERCISES:
        parser.error(f"unknown exercise {args.exercise!r}; choose from {', '.join(exercises.EXERCISES)} (or `list`)")
    settings = resolve_settings(args, parser)
    exercise = exercises.get(args.exercise)
    submission = args.submission or find_working_copy(exercise)

    from .grading import grade

    if args.json:
        verdict = grade(exercise.id, submission, settings)
        print(json.dumps(verdict.to_json(), indent=2))
        return verdict.exit_code

    from rich.console import Console

    from .report import render

    console = Console()
    with console.status(f"Grading {submission} …", spinner="dots"):
        verdict = grade(exercise.id, submission, settings)
    console.print(render(verdict))
    return verdict.exit_code


def find_working_copy(exercise) -> Path:
    """exercises/<id>.py in the current folder or above it, else in the installed project."""
    here = Path.cwd()
    for folder in (here, *here.parents):
        candidate = folder / "exercises" / f"{exercise.id}.py"
        if candidate.is_file():
            return candidate
    return exercise.stub


def list_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="grade list", description="List the exercises.")
    parser.add_argument("--json", action="store_true", help="print the list as JSON")
    args = parser.parse_args(argv)
    rows = [
        {"id": e.id, "title": e.title, "stub": str(find_working_copy(e).resolve()), "solution": str(e.solution)}
        for e in exercises.EXERCISES.values()
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    from .stubs import make_stub

    table = Table(title="Transformer exercises", title_justify="left")
    for column in ("id", "title", "state"):
        table.add_column(column, no_wrap=True)
    table.add_column("file to edit", overflow="fold")
    for exercise, row in zip(exercises.EXERCISES.values(), rows):
        working = Path(row["stub"])
        untouched = working.is_file() and working.read_text(encoding="utf-8") == make_stub(
            exercise.solution.read_text(encoding="utf-8")
        )
        state = "not started" if untouched else "edited"
        table.add_row(row["id"], row["title"], state, row["stub"])
    Console().print(table)
    print(f"Grade one with: grade {next(iter(exercises.EXERCISES))}")
    return 0


def entry_point() -> None:
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(EXIT_ERROR)
    except BrokenPipeError:
        # the reader of our output went away (grade ... | head): not an error of grading
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(EXIT_ERROR)
