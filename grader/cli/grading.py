"""``grade EXERCISE``: grade a working copy or a submission, once or on every save (``--watch``).

A grading goes through this user's warm grading server (``grader.server``) unless ``--no-server``
or ``GRADE_SERVER=off`` says otherwise, or results for a grading platform are asked for; the
verdict it returns is rendered here, as a cold grading's is. Where the server cannot be used, the
grading is made here, cold, and stderr says why."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .. import exercises
from ..exercises import tracks
from ..verdict import EXIT_ERROR
from .common import (exercise_or_file, add_settings_arguments, add_visibility_argument, report_console,
                     resolve_settings, say)


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
  grade server status        the warm grading server (stop: end it)

for instructors:
  grade sample-class try-it                       a class to try the tools on
  grade nbgrader-course course                    an nbgrader course
  grade batch submitted --exercise 3 --out res    grade a whole class
  grade merge res-1 res-2 --out res               one class from its shards
  grade class-report res                          rewrite res/report.html
  grade gradescope-autograder 3 --out ag.zip      Gradescope's autograder
  grade 3 --submission FILE --json                one file, JSON verdict"""


EPILOG = """\
exit codes: 0 every check passed, 1 some check failed, 2 the submission could
not be graded.
environment: GRADE_SEED, GRADE_TIMEOUT, GRADE_MEMORY_MB and GRADE_BACKEND set
the defaults of --seed, --timeout, --memory and --backend; GRADE_STATE_DIR says
where progress and hints are remembered; GRADE_SERVER=off grades without the
warm server, GRADE_SERVER_IDLE=SECONDS is its idle time (default 900);
GRADE_COMPILED=FOLDER is where the operations JAX compiles are kept between
gradings (default ~/.cache/transformer-exercises/compiled; off keeps none).
TF_CPP_MIN_LOG_LEVEL=3 keeps TensorFlow's C++ logs quiet."""


def grade_parser() -> argparse.ArgumentParser:
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
    parser.add_argument("--all-backends", action="store_true",
                        help="grade on every installed Keras backend and say whether the layer behaves the same "
                             "on all: the same verdict, outputs and gradients (the first check and call that "
                             "differ, where not)")
    parser.add_argument("--no-server", action="store_true",
                        help="grade in a fresh process, without the warm grading server that keeps TensorFlow "
                             "imported between gradings (GRADE_SERVER=off does the same)")
    add_settings_arguments(parser)
    platforms = parser.add_argument_group("results for grading platforms (written whatever the outcome)")
    platforms.add_argument("--gradescope-results", type=Path, metavar="FILE",
                           help="also write the verdict as Gradescope's autograder results.json to FILE")
    add_visibility_argument(platforms)
    platforms.add_argument("--prairielearn-results", type=Path, metavar="FILE",
                           help="also write the verdict as PrairieLearn's external grading results.json to FILE")
    return parser


def grade_command(argv: list[str]) -> int:
    parser = grade_parser()
    args = parser.parse_args(argv)
    exercise, named = exercise_or_file(parser, args.exercise)
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
    if args.all_backends and (args.watch or platform_results):
        parser.error("--all-backends compares backends once; it cannot be combined with --watch, "
                     "--gradescope-results or --prairielearn-results")
    if args.all_backends and args.backend:
        parser.error("--all-backends grades on every installed backend; leave out --backend")
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

    warm = warm_grader(args, parser, platform_results)
    try:
        if args.all_backends:
            if note:
                print(note, file=sys.stderr)
            return all_backends(exercise, submission, settings, args, parser, warm)
        if args.json or platform_results:
            if note:
                print(note, file=sys.stderr)
            verdict = grade_and_write_results(exercise, submission, settings, args, warm)
            if args.json:
                print(json.dumps(verdict.to_json(), indent=2))
            else:
                from ..report import render

                report_console().print(render(verdict, details=args.details, all_checks=args.all_checks,
                                              next_step=tracks.next_step(verdict.exercise)))
            return verdict.exit_code

        console = report_console()
        if note:
            say(console, note, "yellow")
        if submission.is_dir():
            submission = _submission_in(exercise, submission, parser)
        view = {"details": args.details, "all_checks": args.all_checks}
        if args.watch:
            return watch(exercise, submission, settings, console, view, warm)
        return grade_and_show(exercise, submission, settings, console, view=view, grader=warm).exit_code
    except ServerLost as exc:
        print(f"grade: {exc}", file=sys.stderr)
        return EXIT_ERROR


class ServerLost(Exception):
    """The grading server stopped while grading, or could not grade: no verdict (exit code 2)."""


class WarmGrader:
    """Grades through this user's grading server, started on first use; where the server cannot be
    used (its folder is not private, it cannot start), through ``fallback`` (a cold grading by
    default), saying why once on stderr."""

    def __init__(self, fallback=None):
        self._fallback = fallback
        self._client = None
        self._unavailable = False

    def _reached(self):
        from ..server.client import Client, Unavailable

        if self._client is None and not self._unavailable:
            try:
                self._client = Client()
            except Unavailable as exc:
                self._give_up(exc)
        return self._client

    def _give_up(self, why) -> None:
        self._unavailable, self._client = True, None
        print(f"grade: grading without the warm grading server: {why}", file=sys.stderr)

    def _through(self, call, cold):
        from ..server.client import Failed, Stopped, Unavailable

        client = self._reached()
        if client is not None:
            try:
                return call(client)
            except Unavailable as exc:
                self._give_up(exc)
            except (Stopped, Failed) as exc:
                raise ServerLost(str(exc)) from None
        return cold()

    def __call__(self, exercise_id: str, submission: Path, settings):
        def cold():
            if self._fallback is not None:
                return self._fallback(exercise_id, submission, settings)
            from ..api import grade

            return grade(exercise_id, submission, settings)

        return self._through(lambda client: client.grade(exercise_id, submission, settings), cold)

    def grade_all(self, exercise_id: str, submission: Path, settings):
        from ..portability import grade_all

        return self._through(lambda client: client.grade_all(exercise_id, submission, settings),
                             lambda: grade_all(exercise_id, submission, settings))


def warm_grader(args, parser, platform_results) -> "WarmGrader | None":
    """The server's grader for this command, or None to grade cold: ``--no-server``, ``GRADE_SERVER=off``,
    and results for a grading platform (a platform's container grades once, and keeps nothing running)."""
    from ..server import place

    try:
        wanted = place.wanted()
        place.idle_seconds()
    except ValueError as exc:
        parser.error(str(exc))
    if args.no_server or platform_results or not wanted:
        return None
    return WarmGrader()


def all_backends(exercise, submission: Path, settings, args, parser, warm=None) -> int:
    """``--all-backends``: grade on each installed backend, TensorFlow's verdict first, and compare.
    The exit code is the TensorFlow verdict's."""
    from ..student import progress

    if warm is not None:
        grade_all = warm.grade_all
    else:
        from ..portability import grade_all

    if submission.is_dir():
        submission = _submission_in(exercise, submission, parser)
    if args.json:
        comparison = grade_all(exercise.id, submission, settings)
        print(json.dumps(comparison.to_json(), indent=2))
    else:
        from ..report import backends_view, render

        console = report_console()
        with console.status(f"Grading {submission} on every installed backend …", spinner="dots"):
            comparison = grade_all(exercise.id, submission, settings)
        reference = comparison.verdicts[comparison.reference]
        console.print(render(reference, details=args.details, all_checks=args.all_checks,
                             next_step=tracks.next_step(reference.exercise)))
        console.print(backends_view(comparison))
    verdict = comparison.verdicts[comparison.reference]
    progress.record_verdict(verdict)
    return verdict.exit_code


def grade_and_write_results(exercise, submission: Path, settings, args, warm=None):
    """Grade once, without a spinner (through ``warm``, the server's grader, if given), and write the
    results files asked for. A folder that holds no single submission is an ungradable submission
    (exit code 2), reported in them too."""
    import platform
    import time

    from ..integrations import platforms
    from ..student import progress
    from ..verdict import error_verdict

    if warm is not None:
        grade = warm
    else:
        from ..api import grade
    started = time.perf_counter()
    if submission.is_dir():
        try:
            submission = platforms.find_submission(submission, exercise.id)
        except platforms.SubmissionNotFound as exc:
            context = {"title": exercise.title, "timeout": settings.timeout, "memory_mb": settings.memory_mb,
                       "seed": settings.seed if settings.seed is not None else "none (nothing was graded)",
                       "seed_given": settings.seed is not None, "python": platform.python_version()}
            from ..api import max_points

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
    from ..integrations.platforms import SubmissionNotFound, find_submission

    try:
        return find_submission(folder, exercise.id).resolve()
    except SubmissionNotFound as exc:
        parser.exit(EXIT_ERROR, f"grade: {exc}\n")


def grade_and_show(exercise, submission: Path, settings, console, watching: bool = False, runner=None,
                   view: dict | None = None, grader=None):
    """Grade and print the report. ``grader(exercise_id, submission, settings)`` gives the verdict
    (``WarmGrader``: through the grading server); without it, ``runner`` starts the child (a fresh
    process by default, a fork of the warm worker in watch mode). ``view`` holds the report's
    options (``details``, ``all_checks``). In watch mode the new report replaces the last one on the
    screen once it is ready."""
    from ..student import progress
    from ..report import render

    from .. import compiled

    status = f"Grading {submission} …"
    if settings is not None and not compiled.filled(exercise, settings.backend):
        status += (f" (the first grading of {exercise.id} on {settings.backend.upper()} runs the grader's solution "
                   "too, once, to keep what it compiles for the next ones)")
    with console.status(status, spinner="dots"):
        if grader is not None:
            verdict = grader(exercise.id, submission, settings)
        else:
            from ..api import Grading

            grading = Grading(exercise.id, submission, settings) if runner is None else \
                Grading(exercise.id, submission, settings, runner=runner)
            verdict = grading.finish()
    progress.record_verdict(verdict)
    verdict.context["watching"] = watching
    if watching:
        console.clear()
    console.print(render(verdict, **(view or {}), next_step=tracks.next_step(verdict.exercise)))
    return verdict


def watch(exercise, submission: Path, settings, console, view: dict | None = None, warm=None) -> int:
    """Grade now, then again after every save of ``submission``, until Ctrl-C. Through ``warm`` (the
    grading server's grader) if given; else, or where the server cannot be used, through a worker
    of this command's own."""
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
    own: list = []

    def forked(exercise_id, path, grading_settings):
        from ..api import Grading
        from ..workers import Workers

        if not own:
            own.append(Workers(backend=grading_settings.backend))
        return Grading(exercise_id, path, grading_settings, runner=own[0]).finish()

    grader = forked if warm is None else WarmGrader(fallback=forked)

    def grade_once():
        try:
            return grade_and_show(exercise, submission, settings, console, watching=True, view=view, grader=grader)
        except ServerLost as exc:
            say(console, f"{str(exc)[:1].upper()}{str(exc)[1:]}.", "red")
            return None

    try:
        return watch_loop(submission, wakeups, grade_once, console)
    finally:
        for workers in own:
            workers.close()


def watch_loop(submission: Path, wakeups, grade_once, console) -> int:
    """Grade once, then at each wake-up grade again if the file's content differs from the last graded.

    The content decides, not the events: a save that lands while a grading runs, or before the
    file watcher has started, is graded at the next wake-up; a save of the same text is not graded
    twice; while the file is missing (an editor replacing it) nothing is graded.
    """
    import time

    from ..student.progress import file_digest

    graded = file_digest(submission)
    started = time.monotonic()
    verdict = grade_once()  # None: no verdict this time (the grading server stopped while grading)
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
    return verdict.exit_code if verdict is not None else EXIT_ERROR


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


def find_working_copy(exercise) -> Path | None:
    """exercises/<id>.py in the current folder or above it; else, in a clone of the repository,
    the clone's own; else (an installed wheel, outside any workspace) None."""
    here = Path.cwd()
    for folder in (here, *here.parents):
        candidate = folder / "exercises" / f"{exercise.id}.py"
        if candidate.is_file():
            return candidate.resolve()
    return None if exercises.INSTALLED_FROM_WHEEL else exercise.stub
