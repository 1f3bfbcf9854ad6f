"""The ``grade`` command: thin wrappers over the grading API, the report and the student tools.

    grade EXERCISE [--submission PATH] [--json] [--watch] [--seed N] [--timeout S] [--memory MB]
    grade list [--json]
    grade hint EXERCISE [--all] [--reset]
    grade nbgrader-course DIR [--force]
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
from .verdict import EXIT_ERROR

USAGE = """\
grade EXERCISE [--submission PATH] [--json] [--watch] [--seed N] [--timeout SECONDS] [--memory MB]
       grade list [--json]
       grade hint EXERCISE [--all] [--reset]
       grade nbgrader-course DIR [--force]
       grade batch PATH... --exercise EXERCISE --out DIR [--jobs N] [--gradebook COURSE]
       grade explain exercise3 [--submission PATH] [--seed N] [--json]"""

DESCRIPTION = """\
Grade your Transformer exercises. `grade exercise3` grades your working copy of
exercises/exercise3.py and shows what passed, what failed and why.

  grade list            every exercise, its state and what to do next
  grade hint exercise3  the next hint for an exercise (--all for all of them)
  grade nbgrader-course DIR   write an nbgrader course with every exercise (for instructors)
  grade batch submitted/ --exercise exercise3 --out results/   grade a whole class
  grade explain exercise3   measure why the encoder needs two LayerNormalization layers"""

EPILOG = """\
exit codes: 0 every check passed, 1 some check failed, 2 the submission could not be graded.
environment: GRADE_SEED, GRADE_TIMEOUT and GRADE_MEMORY_MB set the defaults of --seed,
--timeout and --memory; GRADE_STATE_DIR says where progress and hints are remembered."""


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "list":
        return list_command(argv[1:])
    if argv and argv[0] == "hint":
        return hint_command(argv[1:])
    if argv and argv[0] == "nbgrader-course":
        return course_command(argv[1:])
    if argv and argv[0] == "batch":
        return batch_command(argv[1:])
    if argv and argv[0] == "explain":
        return explain_command(argv[1:])
    return grade_command(argv)


def _exercise_choice(parser: argparse.ArgumentParser, value: str):
    if value not in exercises.EXERCISES:
        parser.error(f"unknown exercise {value!r}; choose from {', '.join(exercises.EXERCISES)}")
    return exercises.get(value)


# --------------------------------------------------------------------------- grade


def _grade_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grade", usage=USAGE, description=DESCRIPTION, epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("exercise", help=f"the exercise to grade: {', '.join(exercises.EXERCISES)}")
    parser.add_argument("--submission", type=Path, metavar="PATH",
                        help="grade this .py file or .ipynb notebook instead of your working copy")
    parser.add_argument("--json", action="store_true", help="print only the JSON verdict on stdout")
    parser.add_argument("--watch", action="store_true",
                        help="grade again every time the file is saved (Ctrl-C to stop)")
    add_settings_arguments(parser)
    return parser


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
    exercise = _exercise_choice(parser, args.exercise)
    settings = resolve_settings(args, parser)
    submission = (args.submission or find_working_copy(exercise)).resolve()
    if args.json and args.watch:
        parser.error("--watch shows the report after each save; it cannot be combined with --json")

    from . import progress
    from .grading import grade

    if args.json:
        verdict = grade(exercise.id, submission, settings)
        progress.record_verdict(verdict)
        print(json.dumps(verdict.to_json(), indent=2))
        return verdict.exit_code

    from rich.console import Console

    console = Console()
    if args.watch:
        return watch(exercise, submission, settings, console)
    return grade_and_show(exercise, submission, settings, console).exit_code


def grade_and_show(exercise, submission: Path, settings, console):
    from . import progress
    from .grading import grade
    from .report import render

    with console.status(f"Grading {submission} …", spinner="dots"):
        verdict = grade(exercise.id, submission, settings)
    progress.record_verdict(verdict)
    console.print(render(verdict))
    return verdict


def watch(exercise, submission: Path, settings, console) -> int:
    """Grade now, then again after every save of ``submission``, until Ctrl-C."""
    from watchfiles import watch as watch_files

    if not submission.parent.is_dir():
        console.print(f"[red]Cannot watch {submission}: its folder does not exist.[/red]")
        return EXIT_ERROR
    wakeups = watch_files(
        submission.parent,
        watch_filter=lambda _change, path: Path(path).resolve() == submission,
        raise_interrupt=False,
        yield_on_timeout=True,  # wake up at least once a second, events or not
        rust_timeout=1000,
    )
    return watch_loop(submission, wakeups, lambda: grade_and_show(exercise, submission, settings, console), console)


def watch_loop(submission: Path, wakeups, grade_once, console) -> int:
    """Grade once, then at each wake-up grade again if the file's content differs from the last graded.

    The content decides, not the events: a save that lands while a grading runs, or before the
    file watcher has started, is graded at the next wake-up; a save of the same text is not graded
    twice; while the file is missing (an editor replacing it) nothing is graded.
    """
    from .progress import file_digest

    graded = file_digest(submission)
    verdict = grade_once()
    _waiting(console, submission)
    try:
        for _changes in wakeups:
            current = file_digest(submission)
            if current is None or current == graded:
                continue
            graded = current
            console.clear()
            verdict = grade_once()
            _waiting(console, submission)
    except KeyboardInterrupt:
        pass
    return verdict.exit_code


def _waiting(console, submission: Path) -> None:
    console.print(f"[dim]Watching {submission} — save it to grade again, Ctrl-C to stop.[/dim]")
    console.file.flush()


def find_working_copy(exercise) -> Path:
    """exercises/<id>.py in the current folder or above it, else in the installed project."""
    here = Path.cwd()
    for folder in (here, *here.parents):
        candidate = folder / "exercises" / f"{exercise.id}.py"
        if candidate.is_file():
            return candidate
    return exercise.stub


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
    args = parser.parse_args(argv)
    rows = [
        {"id": e.id, "title": e.title, "stub": str(find_working_copy(e).resolve()), "solution": str(e.solution)}
        for e in exercises.EXERCISES.values()
    ]
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0

    from rich.console import Console

    from .report import progress_table

    console = Console()
    states = exercise_states(console)
    console.print(progress_table(states))
    return 0


def exercise_states(console) -> list[dict]:
    """One row per exercise: state, score and next step, grading files not yet graded as they are."""
    from . import progress
    from .grading import grade_pairs
    from .stubs import expected_solution, make_stub

    states, to_grade = [], {}
    for exercise in exercises.EXERCISES.values():
        path = find_working_copy(exercise).resolve()
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
        description="Show the next hint for an exercise; each call shows one more.",
    )
    parser.add_argument("exercise", help=f"one of {', '.join(exercises.EXERCISES)}")
    parser.add_argument("--all", action="store_true", help="show every hint at once")
    parser.add_argument("--reset", action="store_true", help="start again from the first hint")
    args = parser.parse_args(argv)
    exercise = _exercise_choice(parser, args.exercise)

    from rich.console import Console
    from rich.markdown import Markdown
    from rich.panel import Panel

    from . import progress
    from .hints import read_hints

    hints = read_hints(exercise.hints)
    console = Console()
    if args.reset:
        progress.reset_hints(exercise.id)
        if not args.all:
            console.print(f"Hints for {exercise.id} start again from hint 1.")
            return 0
    shown = range(len(hints)) if args.all else [progress.next_hint(exercise.id, len(hints))]
    for index in shown:
        console.print(Panel(Markdown(hints[index]), title=f"{exercise.id} — hint {index + 1} of {len(hints)}",
                            title_align="left", border_style="cyan"))
    if not args.all:
        last = shown[-1] + 1 == len(hints)
        console.print("[dim]That was the last hint.[/dim]" if last else
                      f"[dim]Run `grade hint {exercise.id}` again for the next one.[/dim]")
    return 0


# --------------------------------------------------------------------------- batch


def batch_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="grade batch",
        description="Grade every .py or .ipynb submission under the paths given (nbgrader's "
                    "submitted/<student>/<assignment>/ layout included: the student is the id). "
                    "TensorFlow is imported once; each submission runs in its own forked child with "
                    "the same limits and checks as `grade`. Writes verdicts.jsonl, summary.csv and "
                    "gradescope/<id>/results.json into --out as results arrive.",
    )
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="submission files or folders")
    parser.add_argument("--exercise", required=True, help=f"one of {', '.join(exercises.EXERCISES)}")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR", help="folder for the results")
    parser.add_argument("--jobs", type=int, default=None, metavar="N",
                        help="submissions graded at once (default: the cores available)")
    parser.add_argument("--gradebook", type=Path, metavar="COURSE",
                        help="then autograde, in nbgrader's sense, the notebooks of COURSE/submitted/ from these "
                             "verdicts without executing them again: scores in COURSE/gradebook.db, notebooks in "
                             "COURSE/autograded/, so nbgrader export and generate_feedback work (the assignment "
                             "must have been generated there)")
    add_settings_arguments(parser)
    args = parser.parse_args(argv)
    exercise = _exercise_choice(parser, args.exercise)
    settings = resolve_settings(args, parser)
    if args.gradebook is not None:  # refused before grading, not after
        from .gradebook import course_config

        try:
            course_config(args.gradebook, exercise.id)
        except (FileNotFoundError, LookupError) as exc:
            parser.error(f"--gradebook: {exc}")
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from .batch import discover, run_batch
    from .report import batch_summary

    try:
        submissions = discover(args.paths, exercise.id)
    except FileNotFoundError as exc:
        parser.error(str(exc))
    console = Console()
    if not submissions:
        console.print("[yellow]No .py or .ipynb submission found under the paths given.[/yellow]")
        return 0
    counts = {"passed": 0, "failed": 0, "error": 0}

    def describe() -> str:
        return (f"[green]{counts['passed']} passed[/green]  [red]{counts['failed']} failed[/red]  "
                f"[magenta]{counts['error']} error[/magenta]")

    with Progress(TextColumn(f"Grading {exercise.id}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.description}"), TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task(describe(), total=len(submissions))

        def advance(result):
            counts[result.verdict.status] = counts.get(result.verdict.status, 0) + 1
            progress.update(task, advance=1, description=describe())

        results = run_batch(exercise.id, submissions, args.out, settings, args.jobs, on_result=advance)
    console.print(batch_summary(results, args.out.resolve()))
    if args.gradebook is not None:
        return store_in_gradebook(args.gradebook, exercise.id, results, console)
    return 0


def store_in_gradebook(course: Path, exercise_id: str, results, console) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from .gradebook import store

    with Progress(TextColumn("Storing in the gradebook"), BarColumn(), MofNCompleteColumn(),
                  console=console) as progress:
        task = progress.add_task("", total=len(results))
        try:
            stored = store(course, exercise_id, results, on_student=lambda _: progress.advance(task))
        except (FileNotFoundError, LookupError) as exc:
            console.print(f"[red]Scores not stored in the gradebook: {exc}[/red]")
            return EXIT_ERROR
    for student, why in stored.skipped:
        console.print(f"[yellow]Not stored for {student}: {why}[/yellow]")
    for student, why in stored.failed:
        console.print(f"[red]nbgrader could not autograde {student}: {why}[/red]")
    console.print(f"Autograded {len(stored.students)} student(s) into {course}: scores in gradebook.db, notebooks "
                  f"in autograded/. There, `nbgrader export` writes grades.csv and "
                  f"`nbgrader generate_feedback {exercise_id}` the feedback.")
    return EXIT_ERROR if stored.failed else 0


# --------------------------------------------------------------------------- explain


def explain_command(argv: list[str]) -> int:
    """`grade explain exercise3`: experiments on the encoder answering why it needs two norms."""
    from .explain import DEFAULT_SEED, EXPLAINABLE, EXPLAIN_TIMEOUT

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

    from .explain import explain

    if args.json:
        explanation = explain(exercise.id, submission, settings)
        print(json.dumps(explanation.to_json(), indent=2))
        return explanation.exit_code

    from rich.console import Console

    from .explain_report import render

    console = Console()
    with console.status("Starting …", spinner="dots") as status:
        explanation = explain(exercise.id, submission, settings, on_progress=status.update)
    console.print(render(explanation))
    return explanation.exit_code


# --------------------------------------------------------------------------- nbgrader


def course_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="grade nbgrader-course",
        description="Write an nbgrader course folder: nbgrader_config.py and source/<exercise>/<exercise>.ipynb "
                    "for every exercise. Then, in that folder: nbgrader generate_assignment exercise3, and "
                    "after collecting: nbgrader autograde exercise3.",
    )
    parser.add_argument("folder", type=Path, help="the course folder (created if missing)")
    parser.add_argument("--force", action="store_true", help="overwrite notebooks or a config that differ")
    args = parser.parse_args(argv)

    from .notebooks import write_course

    folder = args.folder.resolve()
    existing = [p for p in [folder / "nbgrader_config.py", *folder.glob("source/*/*.ipynb")] if p.exists()]
    if existing and not args.force:
        import tempfile

        with tempfile.TemporaryDirectory() as scratch:
            fresh = {p.relative_to(scratch): p.read_bytes() for p in write_course(Path(scratch))}
            changed = [p for p in existing if fresh.get(p.relative_to(folder)) != p.read_bytes()]
        if changed:
            parser.error("these files exist and differ from what would be written (use --force to "
                         "overwrite them): " + ", ".join(str(p) for p in changed))
    written = write_course(folder)
    for path in written:
        print(f"wrote {path}")
    print(f"Next: cd {folder} && nbgrader generate_assignment exercise3")
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
