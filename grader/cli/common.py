"""What the commands share: choosing an exercise or a file, the grading settings, printing paths."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from .. import exercises
from ..exercises import tracks
from .commands import COMMANDS


def nearest(value: str, choices) -> list[str]:
    """The choices closest to a mistyped ``value``: the best one, or the two that tie for best,
    and none when nothing is close or too many tie (exercise9 is as near to exercise1 as to 5)."""
    import difflib

    scored = sorted(((difflib.SequenceMatcher(None, value.lower(), choice).ratio(), choice) for choice in choices),
                    key=lambda pair: -pair[0])
    if not scored or scored[0][0] < 0.6:
        return []
    best = [choice for score, choice in scored if score == scored[0][0]]
    return best if len(best) <= 2 else []


def _did_you_mean(value: str, commands: bool) -> str:
    exercise_ids = list(exercises.EXERCISES)
    found = nearest(value, exercise_ids + (list(COMMANDS) if commands else []))
    shown = [name if name in exercise_ids else f"grade {name}" for name in found]
    return f"\ndid you mean {' or '.join(shown)}?" if shown else ""


def exercise_choice(parser: argparse.ArgumentParser, value: str, commands: bool = False):
    """An exercise by id, or by its number (3 for exercise3); a mistyped one gets the nearest
    name suggested (and, for ``grade NAME``, the nearest command)."""
    if value.isdigit():
        track = current_tracks()[0]
        if 1 <= int(value) <= len(track.exercises):
            value = track.exercises[int(value) - 1]
    if value not in exercises.EXERCISES:
        parser.error(f"unknown exercise {value!r}{_did_you_mean(value, commands)}\n"
                     + "".join(f"{track.chapter.split(', ')[1]}: {', '.join(track.exercises)}\n"
                               for track in tracks.TRACKS)
                     + f"or an exercise's number: here, grade 1 is {current_tracks()[0].exercises[0]}"
                     + ("\ncommands: grade --help lists them" if commands else ""))
    return exercises.get(value)


def exercise_or_file(parser: argparse.ArgumentParser, value: str):
    """(exercise, path or None): `grade exercise3`, `grade 3`, or `grade exercises/exercise3.py` — a
    file named after its exercise, graded as --submission would."""
    import re

    path = Path(value)
    if value.isdigit() or value in exercises.EXERCISES or (path.suffix not in (".py", ".ipynb")
                                                           and not path.exists()):
        return exercise_choice(parser, value, commands=True), None
    named = sorted((i for i in exercises.EXERCISES if re.match(re.escape(i) + r"(?!\d)", path.stem)), key=len)
    if not named:
        parser.error(f"cannot tell which exercise {value} is: its name does not start with an exercise id. "
                     f"Use grade EXERCISE --submission {value}")
    return exercises.get(named[-1]), path


def add_visibility_argument(parser) -> None:
    from ..integrations.platforms import DEFAULT_VISIBILITY, VISIBILITIES

    parser.add_argument("--gradescope-visibility", choices=VISIBILITIES, default=None, metavar="V",
                        help=f"when students see the checks in Gradescope: {', '.join(VISIBILITIES)} "
                             f"(default {DEFAULT_VISIBILITY}; whether the file could be graded at all "
                             "is always visible)")


def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=None,
                        help="repeat a run's inputs and weight values (default: a fresh secret seed per run, "
                             "shown in the report)")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help="wall-clock limit for running each submission (default 120)")
    parser.add_argument("--memory", type=int, default=None, metavar="MB",
                        help="memory limit of the process running each submission (default 4096)")
    add_backend_argument(parser)


def add_backend_argument(parser: argparse.ArgumentParser) -> None:
    from ..backends import NAMES

    parser.add_argument("--backend", choices=NAMES, default=None, metavar="NAME",
                        help=f"the Keras backend the submission runs on: {', '.join(NAMES)} (default tensorflow; "
                             "jax and torch need the extras [jax] and [torch])")


def resolve_settings(args, parser):
    """Each setting from its flag, else its environment variable, else the default;
    a bad value is reported with where it came from."""
    from ..settings import DEFAULT_MEMORY_MB, DEFAULT_SEED, DEFAULT_TIMEOUT, Settings

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

    from .. import backends

    try:
        backend = backends.resolve(getattr(args, "backend", None), os.environ)
    except backends.BackendError as exc:
        parser.error(str(exc))
    return Settings(
        seed=pick(args.seed, "GRADE_SEED", DEFAULT_SEED, int, 0, "--seed"),
        timeout=pick(args.timeout, "GRADE_TIMEOUT", DEFAULT_TIMEOUT, float, 1, "--timeout"),
        memory_mb=pick(args.memory, "GRADE_MEMORY_MB", DEFAULT_MEMORY_MB, int, 512, "--memory"),
        backend=backend,
    )


def workspace_exercises_folder() -> Path | None:
    """The ``exercises/`` folder of the workspace around the current folder, if any."""
    here = Path.cwd()
    for folder in (here, *here.parents):
        if (folder / "exercises").is_dir() and tracks.in_folder(folder / "exercises"):
            return folder / "exercises"
    return None


def current_tracks(edition: str | None = None) -> list:
    """The tracks ``grade list`` shows and ``grade N`` counts in: ``edition`` if given; else those
    whose files the workspace holds (one after ``grade init``, every one in a clone); else, outside
    any workspace, a clone's own, or the default track."""
    if edition is not None:
        return [tracks.get(edition)]
    found = tracks.in_folder(workspace_exercises_folder())
    if not found and not exercises.INSTALLED_FROM_WHEEL:
        found = tracks.in_folder(exercises.EXERCISES_DIR)
    return found or [tracks.get(tracks.DEFAULT)]


def shown(text) -> str:
    """Text from a class's files (names, nbgrader's messages) for Rich markup: escaped and printable."""
    from rich.markup import escape

    from ..report import printable

    return escape(printable(str(text)))


def say(console, text: str, style: str | None = None) -> None:
    """Print a message that carries paths, ids or names: its values are text (never Rich markup),
    control characters are escaped, and it is not wrapped by Rich, so a path in it stays whole for
    copying (the terminal folds a long line)."""
    from rich.text import Text

    from ..report import printable

    console.print(Text(printable(str(text)), style=style or ""), soft_wrap=True, highlight=False)


class _Unpadded:
    """A text stream that drops the spaces ending each line before passing it on: Rich pads a
    report's lines to the console's width, which a terminal hides and a pipe, a file or a log keeps.
    A line's colour codes after its last character stay."""

    def __init__(self, stream):
        self._stream = stream
        self._pending = ""

    def write(self, text: str) -> int:
        import re

        lines = (self._pending + text).split("\n")
        self._pending = lines.pop()
        if lines:
            self._stream.write("".join(re.sub(r" +((?:\x1b\[[0-9;]*m)*)$", r"\1", line) + "\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        # Rich flushes after every print, and a print ends its line: a line still open is written
        # as it is, so nothing waits for a close that may never come
        if self._pending:
            self._stream.write(self._pending)
            self._pending = ""
        self._stream.flush()

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._stream.fileno()

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", "utf-8")


def report_console(**options):
    """The Rich console a command prints its report on: stdout, whose lines end without padding when
    it is not a terminal."""
    import sys

    from rich.console import Console

    stream = sys.stdout
    if not stream.isatty():
        stream = _Unpadded(stream)
    return Console(file=stream, **options)
