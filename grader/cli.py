"""The ``grade`` command: thin wrappers over the grading API, the report and the student tools.

    grade EXERCISE [--submission PATH] [--json] [--watch] [--seed N] [--timeout S] [--memory MB]
                   [--gradescope-results FILE] [--gradescope-visibility V] [--prairielearn-results FILE]
    grade init [DIR] [--edition 2|3] [--force]
    grade list [--json] [--edition 2|3]
    grade hint EXERCISE [--all] [--reset]
    grade nbgrader-course DIR [--exercises EXERCISE... | --edition 2|3] [--force]
    grade batch [PATH...] --exercise EXERCISE --out DIR [--shard K/N] [...]
    grade merge OUT... --out DIR [--force]
    grade class-report OUT...
    grade gradescope-autograder EXERCISE --out ZIP [--visibility V] [--timeout S] [--memory MB]
    grade explain exercise3 [--submission PATH] [--seed N] [--json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

from . import exercises
from .exercises import tracks
from .verdict import EXIT_ERROR

USAGE = """\
grade EXERCISE [--submission PATH] [--watch] [--json] [options]
       grade COMMAND ...        (grade COMMAND --help says more)"""

# One line per command, each an example: at most 80 columns (tests/test_help.py).
DESCRIPTION = """\
Grade your Transformer exercises: `grade exercise1` grades your working copy,
exercises/exercise1.py, and shows what passed, what failed and why.

for students:
  grade init my-exercises    write a workspace: files to edit, instructions
                             (--edition 3: the book's 3rd edition, chapter 15)
  grade list                 every exercise, where you stand, what to do next
  grade exercise1            grade exercise 1 (also: grade 1)
  grade exercise1 --watch    grade again each time you save the file
  grade hint exercise1       the next hint (--all: every hint)
  grade explain exercise3    measure why the encoder needs two norms

for instructors:
  grade nbgrader-course course                    an nbgrader course
  grade batch submitted --exercise 3 --out res    grade a whole class
  grade merge res-1 res-2 --out res               one class from its shards
  grade class-report res                          rewrite res/report.html
  grade gradescope-autograder 3 --out ag.zip      Gradescope's autograder
  grade 3 --submission FILE --json                one file, JSON verdict"""

EPILOG = """\
exit codes: 0 every check passed, 1 some check failed, 2 the submission could
not be graded.
environment: GRADE_SEED, GRADE_TIMEOUT and GRADE_MEMORY_MB set the defaults of
--seed, --timeout and --memory; GRADE_STATE_DIR says where progress and hints
are remembered. TF_CPP_MIN_LOG_LEVEL=3 keeps TensorFlow's C++ logs quiet."""

# The commands main() dispatches, for suggestions when a name is neither a command nor an exercise.
COMMANDS = ("init", "list", "hint", "explain", "nbgrader-course", "batch", "merge", "class-report",
            "gradescope-autograder")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:  # where you stand, and what to do next
        return list_command([])
    if argv and argv[0] == "init":
        return init_command(argv[1:])
    if argv and argv[0] == "gradescope-autograder":
        return autograder_command(argv[1:])
    if argv and argv[0] == "list":
        return list_command(argv[1:])
    if argv and argv[0] == "hint":
        return hint_command(argv[1:])
    if argv and argv[0] == "nbgrader-course":
        return course_command(argv[1:])
    if argv and argv[0] == "batch":
        return batch_command(argv[1:])
    if argv and argv[0] == "merge":
        return merge_command(argv[1:])
    if argv and argv[0] == "class-report":
        return class_report_command(argv[1:])
    if argv and argv[0] == "explain":
        return explain_command(argv[1:])
    if _mistyped_command(argv[0]):  # before the arguments meant for that command are refused
        _exercise_choice(_grade_parser(), argv[0], commands=True)
    return grade_command(argv)


def _mistyped_command(value: str) -> bool:
    """``value`` names no exercise, number or file, and is near a command's name."""
    path = Path(value)
    return not (value.startswith("-") or value.isdigit() or value in exercises.EXERCISES
                or path.suffix in (".py", ".ipynb") or path.exists()) and bool(nearest(value, COMMANDS))


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


def _exercise_choice(parser: argparse.ArgumentParser, value: str, commands: bool = False):
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


def _exercise_or_file(parser: argparse.ArgumentParser, value: str):
    """(exercise, path or None): `grade exercise3`, `grade 3`, or `grade exercises/exercise3.py` — a
    file named after its exercise, graded as --submission would."""
    import re

    path = Path(value)
    if value.isdigit() or value in exercises.EXERCISES or (path.suffix not in (".py", ".ipynb")
                                                           and not path.exists()):
        return _exercise_choice(parser, value, commands=True), None
    named = sorted((i for i in exercises.EXERCISES if re.match(re.escape(i) + r"(?!\d)", path.stem)), key=len)
    if not named:
        parser.error(f"cannot tell which exercise {value} is: its name does not start with an exercise id. "
                     f"Use grade EXERCISE --submission {value}")
    return exercises.get(named[-1]), path


# --------------------------------------------------------------------------- grade


def _grade_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grade", usage=USAGE, description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("exercise", help=f"the exercise to grade: {', '.join(exercises.EXERCISES)}, its number, "
                                         "or the path of an exercise file (exercises/exercise3.py)")
    parser.add_argument("--submission", type=Path, metavar="PATH",
                        help="grade this .py file or .ipynb notebook instead of your working copy; a folder: "
                             "its only .py or .ipynb file, else the one named after the exercise")
    parser.add_argument("--json", action="store_true", help="print only the JSON verdict on stdout")
    parser.add_argument("--watch", action="store_true",
                        help="grade again every time the file is saved (Ctrl-C to stop)")
    parser.add_argument("--details", action="store_true",
                        help="show the full header: seed, limits, versions and every sandbox measure")
    parser.add_argument("--all-checks", action="store_true",
                        help="list every check, passed ones included (by default a topic that passed is one line)")
    add_settings_arguments(parser)
    platforms = parser.add_argument_group("results for grading platforms (written whatever the outcome)")
    platforms.add_argument("--gradescope-results", type=Path, metavar="FILE",
                           help="also write the verdict as Gradescope's autograder results.json to FILE")
    add_visibility_argument(platforms)
    platforms.add_argument("--prairielearn-results", type=Path, metavar="FILE",
                           help="also write the verdict as PrairieLearn's external grading results.json to FILE")
    return parser


def add_visibility_argument(parser) -> None:
    from .integrations.platforms import DEFAULT_VISIBILITY, VISIBILITIES

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


def resolve_settings(args, parser):
    """Each setting from its flag, else its environment variable, else the default;
    a bad value is reported with where it came from."""
    from .api import DEFAULT_MEMORY_MB, DEFAULT_SEED, DEFAULT_TIMEOUT, Settings

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
    exercise, named = _exercise_or_file(parser, args.exercise)
    if named is not None:
        if args.submission is not None:
            parser.error(f"{args.exercise} is already a file to grade; leave out --submission")
        args.submission = named
    settings = resolve_settings(args, parser)
    platform_results = args.gradescope_results or args.prairielearn_results
    if args.json and args.watch:
        parser.error("--watch shows the report after each save; it cannot be combined with --json")
    if args.watch and platform_results:
        parser.error("--watch cannot be combined with --gradescope-results or --prairielearn-results")
    if args.gradescope_visibility and not args.gradescope_results:
        parser.error("--gradescope-visibility applies to --gradescope-results FILE, which is missing")
    note = None
    if args.submission is not None:
        submission = args.submission.resolve()
    else:
        submission = find_working_copy(exercise)
        here = Path.cwd()
        if submission is not None and not any(submission.is_relative_to(folder / "exercises")
                                              for folder in (here, *here.parents)):
            note = (f"No exercises/{exercise.id}.py in {here} or above: grading {submission}, the working copy "
                    "of the clone this grader is installed from. Make a workspace of your own with `grade init DIR`.")
        if submission is None:
            parser.exit(EXIT_ERROR, f"grade: no working copy of {exercise.id}: there is no exercises/{exercise.id}.py "
                                    f"in {Path.cwd()} or a folder above it. Make a workspace with `grade init DIR` "
                                    "and run grade inside it, or grade a file anywhere with --submission PATH.\n")

    if args.json or platform_results:
        if note:
            print(note, file=sys.stderr)
        verdict = grade_and_write_results(exercise, submission, settings, args)
        if args.json:
            print(json.dumps(verdict.to_json(), indent=2))
        else:
            from rich.console import Console

            from .report import render

            Console().print(render(verdict, details=args.details, all_checks=args.all_checks))
        return verdict.exit_code

    from rich.console import Console

    console = Console()
    if note:
        say(console, note, "yellow")
    if submission.is_dir():
        submission = _submission_in(exercise, submission, parser)
    view = {"details": args.details, "all_checks": args.all_checks}
    if args.watch:
        return watch(exercise, submission, settings, console, view)
    return grade_and_show(exercise, submission, settings, console, view=view).exit_code


def grade_and_write_results(exercise, submission: Path, settings, args):
    """Grade once, without a spinner, and write the results files asked for. A folder that
    holds no single submission is an ungradable submission (exit code 2), reported in them too."""
    import platform
    import time

    from .integrations import platforms
    from .student import progress
    from .api import grade, max_points
    from .verdict import error_verdict

    started = time.perf_counter()
    if submission.is_dir():
        try:
            submission = platforms.find_submission(submission, exercise.id)
        except platforms.SubmissionNotFound as exc:
            context = {"title": exercise.title, "timeout": settings.timeout, "memory_mb": settings.memory_mb,
                       "seed": settings.seed if settings.seed is not None else "none (nothing was graded)",
                       "seed_given": settings.seed is not None, "python": platform.python_version()}
            verdict = error_verdict(exercise.id, str(submission), str(exc), max_points(exercise.id), context)
        else:
            verdict = grade(exercise.id, submission, settings)
    else:
        verdict = grade(exercise.id, submission, settings)
    seconds = time.perf_counter() - started
    progress.record_verdict(verdict)
    if args.gradescope_results:
        platforms.write_json(args.gradescope_results, platforms.gradescope_results(
            verdict, args.gradescope_visibility or platforms.DEFAULT_VISIBILITY, execution_time=seconds))
    if args.prairielearn_results:
        platforms.write_json(args.prairielearn_results, platforms.prairielearn_results(verdict))
    return verdict


def _submission_in(exercise, folder: Path, parser) -> Path:
    from .integrations.platforms import SubmissionNotFound, find_submission

    try:
        return find_submission(folder, exercise.id).resolve()
    except SubmissionNotFound as exc:
        parser.exit(EXIT_ERROR, f"grade: {exc}\n")


def grade_and_show(exercise, submission: Path, settings, console, watching: bool = False, runner=None,
                   view: dict | None = None):
    """Grade and print the report; ``runner`` starts the child (a fresh process by default, a fork
    of the warm worker in watch mode); ``view`` holds the report's options (``details``,
    ``all_checks``). In watch mode the new report replaces the last one on the screen once it is
    ready."""
    from .student import progress
    from .api import Grading
    from .report import render

    with console.status(f"Grading {submission} …", spinner="dots"):
        grading = Grading(exercise.id, submission, settings) if runner is None else \
            Grading(exercise.id, submission, settings, runner=runner)
        verdict = grading.finish()
    progress.record_verdict(verdict)
    verdict.context["watching"] = watching
    if watching:
        console.clear()
    console.print(render(verdict, **(view or {})))
    return verdict


def watch(exercise, submission: Path, settings, console, view: dict | None = None) -> int:
    """Grade now, then again after every save of ``submission``, until Ctrl-C."""
    from watchfiles import watch as watch_files

    if not submission.parent.is_dir():
        say(console, f"Cannot watch {submission}: its folder does not exist.", "red")
        return EXIT_ERROR
    wakeups = watch_files(
        submission.parent,
        watch_filter=lambda _change, path: Path(path).resolve() == submission,
        raise_interrupt=False,
        yield_on_timeout=True,  # wake up at least once a second, events or not
        rust_timeout=1000,
    )
    # A worker of the grader's own imports TensorFlow once; each grading is a fresh child forked
    # from it, with the same confinement as a cold grading, so a re-grade skips the import.
    from .integrations.batch import Workers

    workers = Workers()
    try:
        return watch_loop(submission, wakeups, lambda: grade_and_show(exercise, submission, settings, console,
                                                                       watching=True, runner=workers, view=view),
                          console)
    finally:
        workers.close()


def watch_loop(submission: Path, wakeups, grade_once, console) -> int:
    """Grade once, then at each wake-up grade again if the file's content differs from the last graded.

    The content decides, not the events: a save that lands while a grading runs, or before the
    file watcher has started, is graded at the next wake-up; a save of the same text is not graded
    twice; while the file is missing (an editor replacing it) nothing is graded.
    """
    import time

    from .student.progress import file_digest

    graded = file_digest(submission)
    started = time.monotonic()
    verdict = grade_once()
    _status(console, submission, time.monotonic() - started)
    try:
        for _changes in wakeups:
            current = file_digest(submission)
            if current is None or current == graded:
                continue
            graded = current
            started = time.monotonic()
            verdict = grade_once()  # kept before the status line: Ctrl-C after it returns this verdict's code
            _status(console, submission, time.monotonic() - started)
    except KeyboardInterrupt:
        pass
    return verdict.exit_code


def _status(console, submission: Path, seconds: float) -> None:
    """The one status line under a report in watch mode: when the file was saved, how long the
    grading took."""
    from datetime import datetime

    try:
        saved = "saved " + datetime.fromtimestamp(submission.stat().st_mtime).strftime("%H:%M:%S")
    except OSError:
        saved = "not on disk"
    say(console, f"Watching {submission.name} · {saved} · graded in {seconds:.1f} s · save to grade again, "
                 "Ctrl-C to stop.", "dim")
    console.file.flush()


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


def find_working_copy(exercise) -> Path | None:
    """exercises/<id>.py in the current folder or above it; else, in a clone of the repository,
    the clone's own; else (an installed wheel, outside any workspace) None."""
    here = Path.cwd()
    for folder in (here, *here.parents):
        candidate = folder / "exercises" / f"{exercise.id}.py"
        if candidate.is_file():
            return candidate.resolve()
    return None if exercises.INSTALLED_FROM_WHEEL else exercise.stub


# --------------------------------------------------------------------------- init


def init_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="grade init",
        description="Write a workspace into DIR: exercises/exercise1.py ... (the files you edit), "
                    "exercises/exercise1.md ... (the instructions) and exercises/hints/. Inside it, "
                    "`grade list` shows where you stand and `grade exercise1` grades your exercise 1.",
    )
    parser.add_argument("folder", nargs="?", type=Path, default=Path("."), metavar="DIR",
                        help="the workspace folder, created if missing (default: the current folder)")
    parser.add_argument("--force", action="store_true",
                        help="replace files that differ from the fresh ones, keeping a copy of each as "
                             "<name>.bak")
    parser.add_argument("--edition", choices=tracks.names(), default=tracks.DEFAULT,
                        help="the edition of Deep Learning with Python your exercises follow: "
                             + "; ".join(f"{t.name}, {t.chapter.split(', ', 1)[1]} ({', '.join(t.exercises)})"
                                         for t in tracks.TRACKS)
                             + f" (default: {tracks.DEFAULT})")
    args = parser.parse_args(argv)

    from .student.workspace import WorkspaceConflict, init_workspace

    track = tracks.get(args.edition)
    try:
        result = init_workspace(args.folder, force=args.force, edition=track.name)
    except WorkspaceConflict as exc:
        parser.exit(EXIT_ERROR, "grade init: nothing was written. These files exist and differ from the "
                                "fresh ones, so they may hold your work:\n"
                    + "".join(f"  {path}\n" for path in exc.paths)
                    + "Use --force to replace them (each is first kept as <name>.bak).\n")
    except OSError as exc:
        parser.exit(EXIT_ERROR, f"grade init: {exc}\n")
    if result.not_stubs:
        files = ", ".join(str(p) for p in result.not_stubs)
        if exercises.INSTALLED_FROM_WHEEL:
            print(f"warning: this package carries exercise files that differ from the stubs generated from its "
                  f"solutions, edited or solved where it was built: {files}. The workspace gets the stubs. "
                  "Do not hand this package out: a wheel built again packs the stubs.", file=sys.stderr)
        else:
            print(f"note: the clone this grader runs from has edited exercise files ({files}); the workspace "
                  "gets the stubs generated from the solutions.", file=sys.stderr)
    for path in result.written:
        backup = result.backups.get(path)
        print(f"wrote {path}" + (f" (your version is kept as {backup.name})" if backup else ""))
    if result.unchanged:
        print(f"{len(result.unchanged)} file(s) already up to date in {result.folder / 'exercises'}")
    here = Path.cwd().resolve()
    where = "" if result.folder == here else f"cd {_shell_path(result.folder, here)} && "
    first = track.exercises[0]
    print(f"These are the exercises of {track.chapter}.")
    print(f"Next: {where}grade list — then read exercises/{first}.md, edit exercises/{first}.py "
          f"and run grade {first}.")
    return 0


def _shell_path(folder: Path, here: Path) -> str:
    import shlex

    shown = folder.relative_to(here) if folder.is_relative_to(here) else folder
    return shlex.quote(str(shown))


# --------------------------------------------------------------------------- list


def list_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="grade list",
        description="List the exercises with the state of your working copies: not started, "
                    "failing or passed, the score, and what to do next. Files edited since their "
                    "last grading are graded now.",
    )
    parser.add_argument("--json", action="store_true",
                        help='print [{"id", "title", "stub", "solution"}, ...] and grade nothing')
    parser.add_argument("--edition", choices=tracks.names(),
                        help="list this edition's exercises (default: those of the workspace you are in)")
    args = parser.parse_args(argv)
    shown = [exercises.get(i) for track in current_tracks(args.edition) for i in track.exercises]
    rows = [
        {"id": e.id, "title": e.title, "stub": str(find_working_copy(e) or e.stub), "solution": str(e.solution)}
        for e in shown
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0

    from rich.console import Console

    from .report import progress_table

    console = Console()
    states = {row["id"]: row for row in exercise_states(console, shown)}
    for track in current_tracks(args.edition):  # one table per edition (a clone holds every one)
        console.print(progress_table([states[i] for i in track.exercises], track.chapter))
    states = list(states.values())
    if any(row["state"] == "no workspace" for row in states):
        say(console, f"No exercises/ folder in {Path.cwd()} or above it: `grade init DIR` writes a workspace "
                     "with every exercise; run grade inside it.")
    return 0


def exercise_states(console, shown=None) -> list[dict]:
    """One row per exercise (of ``shown``, else of every one): state, score and next step, grading
    files not yet graded as they are."""
    from .student import progress
    from .api import grade_pairs
    from .exercises.stubs import expected_solution, make_stub

    states, to_grade = [], {}
    for exercise in (exercises.EXERCISES.values() if shown is None else shown):
        path = find_working_copy(exercise)
        if path is None:
            states.append({"id": exercise.id, "title": exercise.title, "path": "", "state": "no workspace",
                           "next": "grade init DIR"})
            continue
        row = {"id": exercise.id, "title": exercise.title, "path": str(path)}
        if not path.is_file():
            row.update(state="missing", next=f"restore {path}")
        elif path.read_text(encoding="utf-8", errors="replace") == make_stub(expected_solution(exercise)):
            row.update(state="not started", next=f"start with {exercise.instructions.name}")
        elif (last := progress.last_verdict(path)) is not None:
            row.update(state=_state(last["status"]), score=(last["score"], last["max_score"]), next=last["next"])
        else:
            to_grade[exercise.id] = path
        states.append(row)
    if to_grade:
        with console.status(f"Grading {len(to_grade)} edited exercise(s) …", spinner="dots"):
            for _, _, verdict in grade_pairs(list(to_grade.items())):
                progress.record_verdict(verdict)
        for row in states:
            if row["id"] in to_grade:
                last = progress.last_verdict(Path(row["path"])) or {"status": "error", "score": 0,
                                                                     "max_score": 0, "next": "grade it"}
                row.update(state=_state(last["status"]), score=(last["score"], last["max_score"]),
                           next=last["next"])
    return states


def _state(status: str) -> str:
    return {"passed": "passed", "failed": "failing", "error": "cannot be graded"}.get(status, status)


# --------------------------------------------------------------------------- hint


def hint_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="grade hint",
        description="Show a hint for the first problem your report starts with: your working copy is graded "
                    "(or its last grading reused, if the file has not changed since), and the least revealing "
                    "hint for that problem is shown; each call after that shows a more detailed one.",
    )
    parser.add_argument("exercise", help=f"one of {', '.join(exercises.EXERCISES)}")
    parser.add_argument("--submission", type=Path, metavar="PATH",
                        help="choose the hint for this .py file or .ipynb notebook instead of your working copy")
    parser.add_argument("--all", action="store_true", help="show every hint at once")
    parser.add_argument("--reset", action="store_true", help="start again from the first hint")
    args = parser.parse_args(argv)
    exercise = _exercise_choice(parser, args.exercise)

    from rich.console import Console

    from .student import progress
    from .student.hints import read_tagged_hints

    hints = read_tagged_hints(exercise.hints)
    console = Console()
    if args.reset:
        progress.reset_hints(exercise.id)
        if not args.all:
            console.print(f"Hints for {exercise.id} start again from the least revealing one.")
            return 0
    if args.all:
        for hint in hints:
            _show_hint(console, exercise, hint, len(hints))
        return 0
    path = (args.submission or find_working_copy(exercise))
    settings = resolve_settings(argparse.Namespace(seed=None, timeout=None, memory=None), parser)
    last = _last_grading(exercise, path.resolve(), settings, console) if path is not None and path.is_file() \
        else None
    if last is not None and last["status"] == "passed":
        say(console, f"Every check of {exercise.id} passes: no hint needed. `grade hint {exercise.id} --all` "
                     "shows them all.", "green")
        return 0
    causes = (last or {}).get("causes") or []
    if causes:
        from .student.hints import choose

        root = causes[0][0]
        chosen = choose(hints, causes[0], progress.next_cause_hint(exercise.id, root))
        if chosen is not None:
            hint, place, count = chosen
            _show_hint(console, exercise, hint, len(hints), root)
            more = (f"Still stuck there? `grade hint {exercise.id}` again gives a more detailed one "
                    f"({place + 1} of {count} for it)." if place + 1 < count else
                    f"That is the most detailed hint for it; `grade hint {exercise.id} --all` shows every hint.")
            say(console, f"Your report starts with {root}. {more}", "dim")
            return 0
    if last is not None and last["status"] == "error" and last.get("error"):
        say(console, f"Your file could not be graded: {last['error']}", "magenta")
    index = progress.next_hint(exercise.id, len(hints))
    _show_hint(console, exercise, hints[index], len(hints))
    last_one = index + 1 == len(hints)
    console.print("[dim]That was the last hint.[/dim]" if last_one else
                  f"[dim]Run `grade hint {exercise.id}` again for the next one.[/dim]")
    return 0


def _last_grading(exercise, path: Path, settings, console) -> dict | None:
    """The remembered grading of ``path``'s current content, else a new one (remembered)."""
    from .student import progress

    last = progress.last_verdict(path)
    if last is not None and "causes" in last:
        return last
    from .api import grade

    with console.status(f"Grading {path} to find the hint you need …", spinner="dots"):
        verdict = grade(exercise.id, path, settings)
    progress.record_verdict(verdict)
    return progress.last_verdict(path)


def _show_hint(console, exercise, hint, count: int, check_id: str | None = None) -> None:
    from rich.markdown import Markdown
    from rich.panel import Panel

    title = f"{exercise.id} — hint {hint.number} of {count}" + (f", for {check_id}" if check_id else "")
    console.print(Panel(Markdown(hint.text), title=title, title_align="left", border_style="cyan"))


# --------------------------------------------------------------------------- batch


def batch_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="grade batch",
        description="Grade every submission of an exercise under the paths given. In nbgrader's layout (a "
                    "course folder, its submitted/ folder, or folders in it) only "
                    "submitted/<student>/<exercise>/ is graded, one file per student, the student being the id; "
                    "other assignments and stray files are listed and skipped. Elsewhere every .py or .ipynb "
                    "file is graded. TensorFlow is imported once; each submission runs in its own forked child "
                    "with the same limits and checks as `grade`. Writes verdicts.jsonl, summary.csv, "
                    "gradescope/<id>/results.json, run.json (the run's manifest) and report.html (the class "
                    "at a glance) into --out.",
        epilog="exit codes: 0 every submission found was graded (and, with --gradebook, stored), whatever its "
               "score; 2 nothing to grade, a bad option, or some result not stored in the gradebook.",
    )
    parser.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                        help="submission files or folders, or an nbgrader course folder (default: the --gradebook "
                             "course)")
    parser.add_argument("--exercise", required=True, help=f"one of {', '.join(exercises.EXERCISES)}")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR",
                        help="folder for the results: new or empty, unless --force")
    parser.add_argument("--force", action="store_true",
                        help="replace the results of an earlier run in --out (other files there are kept)")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="submissions graded at once (default: twice the cores available)")
    parser.add_argument("--gradebook", type=Path, metavar="COURSE",
                        help="then autograde, in nbgrader's sense, the notebooks of COURSE/submitted/ from these "
                             "verdicts without executing them again: scores in COURSE/gradebook.db, notebooks in "
                             "COURSE/autograded/, so nbgrader export and generate_feedback work (the assignment "
                             "must have been generated there)")
    parser.add_argument("--shard", metavar="K/N", default=None,
                        help="grade only share K of N of the class, cut by id the same way on every machine "
                             "(1/3, 2/3, 3/3); grade merge joins the shares' results")
    add_settings_arguments(parser)
    add_visibility_argument(parser)
    args = parser.parse_args(argv)
    exercise = _exercise_choice(parser, args.exercise)
    settings = resolve_settings(args, parser)
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    from .integrations.shards import WHOLE, ShardError, parse_shard

    try:
        shard = parse_shard(args.shard) if args.shard is not None else WHOLE
    except ShardError as exc:
        parser.error(str(exc))
    if shard != WHOLE and args.gradebook is not None:
        parser.error("--gradebook stores a whole class: grade the shards without it, grade merge them, then "
                     "store the merged class with one grade batch --gradebook run")
    paths = args.paths or ([args.gradebook] if args.gradebook is not None else [])
    if not paths:
        parser.error("give the submissions to grade: files, folders or an nbgrader course folder")
    if args.gradebook is not None:  # refused before grading, not after
        _require_instructor_tools(parser, "grade batch --gradebook")
        from .integrations.gradebook import course_config

        try:
            course_config(args.gradebook, exercise.id)
        except (FileNotFoundError, LookupError) as exc:
            parser.error(f"--gradebook: {exc}")

    from .integrations.batch import (LayoutError, ResultsFolderError, class_ids, cut, finish_run,
                                     prepare_results_folder, survey)

    try:
        whole = survey(paths, exercise.id)
        prepare_results_folder(args.out, args.force)
    except (FileNotFoundError, LayoutError, ResultsFolderError) as exc:
        parser.error(str(exc))
    found = cut(whole, shard)

    from rich.console import Console

    console = Console()
    for course, submitted in found.searched:
        say(console, f"{course} is an nbgrader course: grading the {exercise.id} submissions in {submitted}.")
    if found.skipped:
        console.print(f"[yellow]Skipped {len(found.skipped)} path(s) that are not {exercise.id} submissions:[/yellow]")
        for skipped in found.skipped:
            say(console, f"  {skipped.path}: {skipped.why}")
    if not whole.submissions and not whole.refused:
        say(console, f"No {exercise.id} submission found under {', '.join(str(p) for p in paths)}.", "red")
        return EXIT_ERROR
    if shard != WHOLE:
        say(console, f"Shard {shard}: {len(found.submissions) + len(found.refused)} of the class's "
                     f"{len(class_ids(whole))} submissions.")
    from .integrations.platforms import gradescope_visibility

    with gradescope_visibility(args.gradescope_visibility):
        settings = dataclasses.replace(settings, private=tuple(found.private()))
        results = grade_found(exercise.id, found, args.out, settings, args.jobs, console)

    from .integrations.course import manual_note
    from .report import batch_summary
    from .integrations.shards import manifest

    sandboxes = [r.verdict.context.get("sandbox") for r in results]
    finish_run(args.out, manifest(exercise.id, shard, class_ids(whole), settings, args.gradescope_visibility,
                                  sandboxes))
    console.print(batch_summary(results, args.out.resolve()))
    say(console, f"The class at a glance: {(args.out / 'report.html').resolve()}")
    note = manual_note(exercise.id)
    if note:
        console.print(f"{note} summary.csv and verdicts.jsonl give these points as manual_points.")
    if args.gradebook is not None:
        return store_in_gradebook(args.gradebook, exercise.id, results, console)
    return 0


def merge_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="grade merge",
        description="Join the results folders of every shard of a class (grade batch --shard K/N) into one "
                    "results folder, the same as grading the class in one run: verdicts.jsonl, summary.csv, "
                    "gradescope/, run.json and report.html. Refused: overlapping or missing shards, mixed "
                    "seeds, grader versions or settings, a shard that did not finish.",
        epilog="exit codes: 0 merged; 2 the shards cannot be merged, or a bad option.")
    parser.add_argument("folders", nargs="+", type=Path, metavar="OUT", help="a results folder of each shard")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR",
                        help="folder for the merged results: new or empty, unless --force")
    parser.add_argument("--force", action="store_true",
                        help="replace the results of an earlier run in --out (other files there are kept)")
    args = parser.parse_args(argv)
    from .integrations.batch import ResultsFolderError, prepare_results_folder
    from .integrations.class_report import write_report
    from .integrations.shards import ShardError, check_mergeable, merge

    out = args.out.resolve()
    if any(out == folder.resolve() for folder in args.folders):
        parser.error(f"--out {args.out} is one of the shards: merge into a folder of its own")
    try:
        check_mergeable(args.folders)
        prepare_results_folder(args.out, args.force)
        merged = merge(args.folders, args.out)
    except (ShardError, ResultsFolderError) as exc:
        parser.error(str(exc))
    write_report(args.out)
    from rich.console import Console

    say(Console(), f"Merged {len(args.folders)} shard(s), {len(merged['class'])} submissions of "
                   f"{merged['exercise']}, into {out} (report.html: the class at a glance).")
    return 0


def class_report_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="grade class-report",
        description="Write report.html again into each results folder of grade batch or grade merge, from its "
                    "verdicts.jsonl, summary.csv and run.json: one static page (no script, nothing fetched) "
                    "with the score distribution, each check's pass rate by topic, the most common "
                    "mistakes, the submissions that could not be graded, and time per grading.",
        epilog="exit codes: 0 every report written; 2 a folder holds no results.")
    parser.add_argument("folders", nargs="+", type=Path, metavar="OUT", help="a results folder")
    args = parser.parse_args(argv)
    from .integrations.class_report import write_report
    from .integrations.results import ResultsError, read_results

    try:
        every = [(folder, read_results(folder)) for folder in args.folders]  # all readable before any is written
    except ResultsError as exc:
        parser.error(str(exc))
    from rich.console import Console

    console = Console()
    for folder, results in every:
        say(console, f"{write_report(folder, results)}: {len(results.verdicts)} submissions")
    return 0


def grade_found(exercise_id: str, found, out: Path, settings, jobs, console) -> list:
    """Grade what ``survey`` found, with a progress bar; refused submissions become error rows."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .integrations.batch import Outputs, refused_result, run_batch, write_result

    refused = [refused_result(exercise_id, submission) for submission in found.refused]
    counts = {"passed": 0, "failed": 0, "error": len(refused)}

    def describe() -> str:
        return (f"[green]{counts['passed']} passed[/green]  [red]{counts['failed']} failed[/red]  "
                f"[magenta]{counts['error']} error[/magenta]")

    graded: list = []
    with Progress(TextColumn(f"Grading {exercise_id}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.description}"), TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task(describe(), total=len(found.submissions) + len(refused), completed=len(refused))

        def advance(result):
            counts[result.verdict.status] = counts.get(result.verdict.status, 0) + 1
            progress.update(task, advance=1, description=describe())

        try:
            if found.submissions:
                graded = run_batch(exercise_id, found.submissions, out, settings, jobs, on_result=advance)
        finally:  # the refused rows join the results folder, even after an interrupted run
            with Outputs(out, append=bool(found.submissions)) as outputs:
                for result in refused:
                    write_result(outputs, result)
    return refused + graded


def shown(text) -> str:
    """Text from a class's files (names, nbgrader's messages) for Rich markup: escaped and printable."""
    from rich.markup import escape

    from .report import printable

    return escape(printable(str(text)))


def say(console, text: str, style: str | None = None) -> None:
    """Print a message that carries paths, ids or names: its values are text (never Rich markup),
    control characters are escaped, and it is not wrapped by Rich, so a path in it stays whole for
    copying (the terminal folds a long line)."""
    from rich.text import Text

    from .report import printable

    console.print(Text(printable(str(text)), style=style or ""), soft_wrap=True, highlight=False)


def store_in_gradebook(course: Path, exercise_id: str, results, console) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from .integrations.gradebook import store
    from .integrations.course import manual_points

    with Progress(TextColumn("Storing in the gradebook"), BarColumn(), MofNCompleteColumn(),
                  console=console) as progress:
        task = progress.add_task("", total=len(results))
        try:
            stored = store(course, exercise_id, results, on_student=lambda _: progress.advance(task))
        except (FileNotFoundError, LookupError) as exc:
            say(console, f"Scores not stored in the gradebook: {exc}", "red")
            return EXIT_ERROR
    for student, why in stored.skipped:
        console.print(f"[yellow]Not stored for {shown(student)}:[/yellow] {shown(why)}", highlight=False,
                      soft_wrap=True)
    for student, why in stored.failed:
        console.print(f"[red]nbgrader could not autograde {shown(student)}:[/red] {shown(why)}", highlight=False,
                      soft_wrap=True)
    course = course.resolve()
    say(console, f"Autograded {len(stored.students)} student(s) into {course}: scores in gradebook.db, notebooks "
                 f"in autograded/. There, `nbgrader export` writes grades.csv and "
                 f"`nbgrader generate_feedback {exercise_id}` the feedback.")
    manual = manual_points(exercise_id)
    if manual and stored.students:
        console.print(f"Each of them also has {manual:g} points of written answer to grade by hand in formgrader: "
                      f"until then nbgrader's totals hold the autograded score only.")
    if not stored.complete:
        console.print(f"[red]{len(stored.skipped) + len(stored.failed)} result(s) are not in the gradebook.[/red]")
        return EXIT_ERROR
    return 0


# --------------------------------------------------------------------------- explain


def explain_command(argv: list[str]) -> int:
    """`grade explain exercise3`: experiments on the encoder answering why it needs two norms."""
    from .explain.run import DEFAULT_SEED, EXPLAINABLE, EXPLAIN_TIMEOUT

    parser = argparse.ArgumentParser(
        prog="grade explain",
        description="Measure why the Transformer encoder needs two LayerNormalization layers. Your encoder "
                    "is graded first; if it passes the structure checks (api, weights, gradients, mask, "
                    "forward) the experiments run on it, otherwise on the reference encoder, and the report "
                    "says which. In the same sandbox as grading, a small classifier is trained on the "
                    "synthetic task with two norms and with one shared norm, over three seeds; each claim of "
                    "the chapter's answer gets its numbers and a verdict: supported, not supported or "
                    "inconclusive. It takes about a minute. An explanation is never a score.",
        epilog="exit codes: 0 every experiment reported, 2 the experiments could not run or lost measurements. "
               "The same seed gives the same numbers.",
    )
    parser.add_argument("exercise", help=f"the exercise to explain: {', '.join(EXPLAINABLE)}")
    parser.add_argument("--submission", type=Path, metavar="PATH",
                        help="explain this .py file or .ipynb notebook instead of your working copy")
    parser.add_argument("--json", action="store_true",
                        help='print only {"exercise", "submission", "subject", "claims": [{"id", "claim", '
                             '"measured", "verdict", "summary"}]} on stdout')
    parser.add_argument("--details", action="store_true",
                        help="show the evidence behind each claim: tables, plots, seeds, versions and the sandbox")
    parser.add_argument("--predict", action="store_true",
                        help="first ask what you expect each experiment to show, then compare with the measurements")
    parser.add_argument("--seed", type=int, default=None,
                        help=f"seed of the experiments: seeds N, N+1 and N+2 are trained (default {DEFAULT_SEED})")
    parser.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                        help=f"wall-clock limit of the grading and of the experiments, each (default "
                             f"{EXPLAIN_TIMEOUT:g})")
    parser.add_argument("--memory", type=int, default=None, metavar="MB",
                        help="memory limit of the processes running the encoder (default 4096)")
    args = parser.parse_args(argv)
    exercise = _exercise_choice(parser, args.exercise)
    if exercise.id not in EXPLAINABLE:
        parser.error(f"grade explain measures {', '.join(EXPLAINABLE)} only (the chapter's question "
                     f"about its two LayerNormalization layers), not {exercise.id}")
    settings = resolve_settings(args, parser)
    if args.timeout is None and not os.environ.get("GRADE_TIMEOUT"):
        settings = dataclasses.replace(settings, timeout=EXPLAIN_TIMEOUT)  # training takes longer than grading
    submission = (args.submission or find_working_copy(exercise)).resolve()
    if not submission.is_file():
        parser.error(f"{submission} is not a file")

    from .explain.run import explain

    if args.json and args.predict:
        parser.error("--predict asks questions on the terminal; it cannot be combined with --json")
    if args.json:
        explanation = explain(exercise.id, submission, settings)
        print(json.dumps(explanation.to_json(), indent=2))
        return explanation.exit_code

    from rich.console import Console

    from rich.text import Text

    from .explain.report import read_predictions, render

    console = Console()
    predictions = None
    if args.predict:
        console.print("Before measuring: what do you expect? Answer y, n, or ? if you are not sure.")

        def ask(question: str):
            try:
                return console.input(Text(f"{question} [y/n/?] "))  # text, not Rich markup
            except EOFError:
                return None

        predictions = read_predictions(ask)
    with console.status("Starting …", spinner="dots") as status:
        explanation = explain(exercise.id, submission, settings, on_progress=status.update)
    console.print(render(explanation, details=args.details, predictions=predictions))
    return explanation.exit_code


# --------------------------------------------------------------------------- nbgrader


def _require_instructor_tools(parser: argparse.ArgumentParser, command: str) -> None:
    """Exit 2 with the install line when the instructor extra is missing."""
    from .extras import missing_instructor_tools

    why = missing_instructor_tools(command)
    if why:
        parser.exit(EXIT_ERROR, f"{why}\n")


def course_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="grade nbgrader-course",
        description="Write an nbgrader course: nbgrader_config.py and source/<exercise>/<exercise>.ipynb for "
                    "every exercise (or those of --exercises). Other files in the folder, notebooks of your "
                    "own included, are left alone. Then, in that folder: nbgrader generate_assignment "
                    "exercise3, and after collecting: nbgrader autograde exercise3.",
        epilog="Release exercise5 only after exercise1 and exercise3 are due: its answer cell carries their "
               "reference layers.",
    )
    parser.add_argument("folder", type=Path, help="the course folder (created if missing)")
    parser.add_argument("--exercises", nargs="+", metavar="EXERCISE",
                        help=f"write only these exercises (default: all of {', '.join(exercises.EXERCISES)})")
    parser.add_argument("--edition", choices=tracks.names(),
                        help="write only the exercises of this edition of the book: "
                             + "; ".join(f"{t.name}, {', '.join(t.exercises)}" for t in tracks.TRACKS))
    parser.add_argument("--force", action="store_true",
                        help="replace course files that differ from what would be written, keeping a copy of "
                             "each in FOLDER/backups/<time>/")
    args = parser.parse_args(argv)
    _require_instructor_tools(parser, "grade nbgrader-course")
    if args.exercises and args.edition:
        parser.error("--exercises and --edition both choose the exercises: give one of them")
    chosen = list(tracks.get(args.edition).exercises) if args.edition else None
    if args.exercises:
        chosen = list(dict.fromkeys(_exercise_choice(parser, name).id for name in args.exercises))

    from .integrations.course import CourseError, update_course

    try:
        update = update_course(args.folder, chosen, force=args.force)
    except CourseError as exc:
        parser.error(str(exc))
    for path in update.written:
        print(f"wrote {path}")
    for path in update.unchanged:
        print(f"unchanged {path}")
    for replaced, backup in update.backups:
        print(f"kept the earlier {replaced.name} as {backup}")
    for note in update.notes:
        print(f"Note: {note}")
    first = (chosen or list(exercises.EXERCISES))[0]
    print(f"Next: cd {args.folder.resolve()} && nbgrader generate_assignment {first}")
    return 0


# --------------------------------------------------------------------------- Gradescope


def autograder_command(argv: list[str]) -> int:
    from .integrations import autograder_zip
    from .integrations.platforms import DEFAULT_VISIBILITY, VISIBILITIES

    parser = argparse.ArgumentParser(
        prog="grade gradescope-autograder",
        description="Build the autograder zip of a Gradescope programming assignment: setup.sh and "
                    "run_autograder at its root, this package as a wheel and every dependency pinned to the "
                    "version installed here. Upload it in the assignment's Configure Autograder page; each "
                    "submission (a .py file or an .ipynb notebook) is then graded as `grade` grades it.",
        epilog="In the assignment's Autograder Settings choose at least 1.0 CPU and 1.5 GB of RAM: grading "
               "holds about 0.7 GB, too close to the default 768 MB. The default timeout of 10 minutes is enough.",
    )
    parser.add_argument("exercise", help=f"the exercise the assignment grades: {', '.join(exercises.EXERCISES)}")
    parser.add_argument("--out", required=True, type=Path, metavar="ZIP", help="the zip file to write")
    parser.add_argument("--visibility", choices=VISIBILITIES, default=DEFAULT_VISIBILITY, metavar="V",
                        help=f"when students see the checks: {', '.join(VISIBILITIES)} (default "
                             f"{DEFAULT_VISIBILITY}); whether the file could be graded at all is always visible")
    parser.add_argument("--timeout", type=float, default=autograder_zip.DEFAULT_TIMEOUT, metavar="SECONDS",
                        help="wall-clock limit of the process running a submission (default "
                             f"{autograder_zip.DEFAULT_TIMEOUT:g}: Gradescope's default half CPU imports "
                             "TensorFlow slowly)")
    parser.add_argument("--memory", type=int, default=autograder_zip.DEFAULT_MEMORY_MB, metavar="MB",
                        help=f"memory limit of that process (default {autograder_zip.DEFAULT_MEMORY_MB})")
    parser.add_argument("--force", action="store_true", help="overwrite ZIP if it exists")
    args = parser.parse_args(argv)
    exercise = _exercise_choice(parser, args.exercise)
    if args.timeout < 1:
        parser.error(f"--timeout must be at least 1, got {args.timeout:g}")
    if args.memory < 512:
        parser.error(f"--memory must be at least 512, got {args.memory}")
    if args.out.suffix != ".zip":
        parser.error(f"--out must name a .zip file, got {args.out}")
    if args.out.exists() and not args.force:
        parser.error(f"{args.out} exists; use --force to overwrite it")
    built = autograder_zip.build_autograder_zip(exercise.id, args.out, visibility=args.visibility,
                                                timeout=args.timeout, memory_mb=args.memory)
    print(f"wrote {built.path.resolve()}: setup.sh, run_autograder, {built.wheel} and "
          f"requirements.txt ({len(built.requirements)} pinned packages)")
    print("Next: upload it in the assignment's Configure Autograder page; in Autograder Settings choose at "
          "least 1.0 CPU and 1.5 GB of RAM.")
    return 0


def _terminated(signum, _frame) -> None:
    """SIGTERM (a job scheduler's stop, kill): leave as from Ctrl-C, so every grading process is
    ended and every scratch folder removed on the way out."""
    raise SystemExit(128 + signum)


def entry_point() -> None:
    import signal

    signal.signal(signal.SIGTERM, _terminated)
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(EXIT_ERROR)
    except BrokenPipeError:
        # the reader of our output went away (grade ... | head): not an error of grading
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(EXIT_ERROR)
