"""The instructor's commands: ``grade batch``, ``merge``, ``class-report``, ``nbgrader-course`` and
``gradescope-autograder``."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import exercises
from ..integrations.class_report import plural
from ..verdict import EXIT_ERROR
from ..exercises import tracks
from .common import (exercise_choice, add_backend_argument, add_settings_arguments, add_visibility_argument,
                     report_console, resolve_settings, say, shown)


def batch_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="grade batch",
        description="Grade every submission of an exercise under the paths given. In nbgrader's layout (a "
                    "course folder, its submitted/ folder, or folders in it) only "
                    "submitted/<student>/<exercise>/ is graded, one file per student, the student being the id; "
                    "other assignments and stray files are listed and skipped. Elsewhere every .py or .ipynb "
                    "file is graded. TensorFlow is imported once; each submission runs in its own forked child "
                    "with the same limits and checks as `grade`. Writes verdicts.jsonl, summary.csv, "
                    "gradescope/<id>/results.json, run.json (the run's manifest) and report.html (the class "
                    "at a glance) into --out, each result on the disk as soon as it is known: --resume finishes a "
                    "run that was killed or stopped part way.",
        epilog="exit codes: 0 every submission found was graded (and, with --gradebook, stored), whatever its "
               "score; 2 nothing to grade, a bad option, or some result not stored in the gradebook.",
    )
    parser.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                        help="submission files or folders, or an nbgrader course folder (default: the --gradebook "
                             "course)")
    parser.add_argument("--exercise", required=True, help=f"one of {', '.join(exercises.EXERCISES)}")
    parser.add_argument("--out", required=True, type=Path, metavar="DIR",
                        help="folder for the results: new or empty, unless --force or --resume")
    parser.add_argument("--force", action="store_true",
                        help="replace the results of an earlier run in --out (other files there are kept)")
    parser.add_argument("--resume", action="store_true",
                        help="finish the run whose results --out holds (one killed or stopped part way): grade only "
                             "the submissions without a verdict there, once its record shows the same exercise, "
                             "shard, seed, grader version, limits and backend; a new or empty --out starts a run")
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
    return parser


def batch_command(argv: list[str]) -> int:
    parser = batch_parser()
    args = parser.parse_args(argv)
    exercise = exercise_choice(parser, args.exercise)
    settings = resolve_settings(args, parser)
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    if args.resume and args.force:
        parser.error("--resume finishes the run in --out and --force replaces it: give one of them")
    if args.resume and args.gradebook is not None:
        parser.error("--resume cannot store in the gradebook: finish the run with --resume (without --gradebook), "
                     "or grade and store the class in one grade batch --gradebook run")
    from ..integrations.shards import WHOLE, ShardError, parse_shard

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
        from ..integrations.gradebook import course_config

        try:
            course_config(args.gradebook, exercise.id)
        except (FileNotFoundError, LookupError) as exc:
            parser.error(f"--gradebook: {exc}")

    from ..integrations import class_run

    try:
        run = class_run.plan(exercise.id, paths, args.out, settings, shard, args.gradescope_visibility,
                             resume=args.resume, force=args.force)
    except class_run.PlanError as exc:
        parser.error(str(exc))

    console = report_console()
    if not show_survey(console, run, paths):
        return EXIT_ERROR
    results = graded_with_progress(run, args.jobs, console)

    from ..integrations.course import manual_note
    from ..report import batch_summary

    console.print(batch_summary(results, args.out.resolve(), run.whole.skipped))
    if run.done:
        say(console, f"Besides these, {plural(len(run.done), 'submission')} graded by the earlier part of the run: "
                     f"every result is in {(args.out / 'summary.csv').resolve()}.")
    say(console, f"The class at a glance: {(args.out / 'report.html').resolve()} (each student's own report in "
                 f"{(args.out / 'students').resolve()})")
    note = manual_note(exercise.id)
    if note and (args.gradebook is not None or any(s.student for s in [*run.whole.submissions, *run.whole.refused])):
        # the written answer is a cell of nbgrader's notebook: a folder of .py files has none
        console.print(f"{note} summary.csv and verdicts.jsonl give that maximum as manual_max_points "
                      "(and as manual_points, its earlier name): up to that many points, graded by hand, "
                      "in no score there.")
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
    from ..integrations.outputs import ResultsFolderError, prepare_results_folder
    from ..integrations.class_report import write_report
    from ..integrations.shards import ShardError, check_mergeable, merge

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
    say(report_console(), f"Merged {plural(len(args.folders), 'shard')}, {plural(len(merged['class']), 'submission')} of "
                   f"{merged['exercise']}, into {out} (report.html: the class at a glance; students/: each "
                   "student's own report).")
    return 0


def class_report_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="grade class-report",
        description="Write report.html again into each results folder of grade batch or grade merge, from its "
                    "verdicts.jsonl, summary.csv and run.json: one static page (no script, nothing fetched) "
                    "with the score distribution, the most common mistakes, every student with their first "
                    "problem, each check's pass rate by topic, the submissions that could not be graded, the "
                    "files not graded and time per grading; and students/, each student's own report.",
        epilog="exit codes: 0 every report written; 2 a folder holds no results.")
    parser.add_argument("folders", nargs="+", type=Path, metavar="OUT", help="a results folder")
    args = parser.parse_args(argv)
    from ..integrations.class_report import write_report
    from ..integrations.results import ResultsError, read_results

    try:
        every = [(folder, read_results(folder)) for folder in args.folders]  # all readable before any is written
    except ResultsError as exc:
        parser.error(str(exc))
    console = report_console()
    for folder, results in every:
        say(console, f"{write_report(folder, results)}: {plural(len(results.verdicts), 'submission')}, each with "
                     f"a page of its own in {Path(folder) / 'students'}")
    return 0


def show_survey(console, run, paths) -> bool:
    """Say what the run found and will grade; False when there is nothing to grade."""
    from ..integrations.discovery import class_ids
    from ..integrations.shards import WHOLE

    exercise_id, whole, found, shard = run.exercise_id, run.whole, run.found, run.shard
    for course, submitted in found.searched:
        say(console, f"{course} is an nbgrader course: grading the {exercise_id} submissions in {submitted}.")
    if found.skipped:
        console.print(f"[yellow]Skipped {plural(len(found.skipped), 'path')} that are not {exercise_id} "
                      "submissions (listed again at the end, and on the class page):[/yellow]")
        for skipped in found.skipped:
            say(console, f"  {skipped.path}: {skipped.why}")
    if not whole.submissions and not whole.refused:
        say(console, f"No {exercise_id} submission found under {', '.join(str(p) for p in paths)}.", "red")
        return False
    if shard != WHOLE:
        say(console, f"Shard {shard}: {run.share} of the class's "
                     f"{plural(len(class_ids(whole)), 'submission')}.")
    if run.done:
        say(console, f"Resuming the run in {run.out}: {plural(len(run.done), 'submission')} graded there already, "
                     f"{run.to_grade} to go.")
    return True


def graded_with_progress(run, jobs, console) -> list:
    """``class_run.grade`` with a progress bar: every row of the run, the refused ones first."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ..integrations import class_run

    counts = {"passed": 0, "failed": 0, "error": 0}

    def describe() -> str:
        return (f"[green]{counts['passed']} passed[/green]  [red]{counts['failed']} failed[/red]  "
                f"[magenta]{counts['error']} error[/magenta]")

    with Progress(TextColumn(f"Grading {run.exercise_id}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.description}"), TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task(describe(), total=run.to_grade)

        def advance(result):
            counts[result.verdict.status] = counts.get(result.verdict.status, 0) + 1
            progress.update(task, advance=1, description=describe())

        return class_run.grade(run, jobs, on_result=advance)


def store_in_gradebook(course: Path, exercise_id: str, results, console) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from ..integrations.gradebook import store
    from ..integrations.course import manual_points

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


def _require_instructor_tools(parser: argparse.ArgumentParser, command: str) -> None:
    """Exit 2 with the install line when the instructor extra is missing."""
    from ..extras import missing_instructor_tools

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
        chosen = list(dict.fromkeys(exercise_choice(parser, name).id for name in args.exercises))

    from ..integrations.course import CourseError, update_course

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


def autograder_command(argv: list[str]) -> int:
    from ..integrations import autograder_zip
    from ..integrations.platforms import DEFAULT_VISIBILITY, VISIBILITIES

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
    exercise = exercise_choice(parser, args.exercise)
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
    for line in autograder_zip.visibility_lines(args.visibility, exercise.id, args.out):
        print(line)
    return 0


def sample_class_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="grade sample-class",
        description="Write a small class of submissions to try the grading tools on: in DIR, the exercise's "
                    "nbgrader course and submitted/<student>/<exercise>/, one student each for a correct "
                    "answer, each common mistake of the exercise, a crash at import, a syntax error, the "
                    "untouched stub and a notebook with a correct answer; and sample-class.json, each "
                    "student's file, what it is, and the status and score grading gives it (the class is "
                    "graded once, about a minute). The folder holds answers: keep it from students.",
        epilog="exit codes: 0 written; 2 DIR is not empty (without --force), or a bad option.")
    parser.add_argument("folder", type=Path, metavar="DIR", help="the folder to write, new or empty")
    parser.add_argument("--exercise", default="exercise3",
                        help=f"one of {', '.join(exercises.EXERCISES)} (default: exercise3)")
    parser.add_argument("--force", action="store_true",
                        help="write into DIR even if it holds files (those of the sample class are replaced)")
    add_backend_argument(parser)
    args = parser.parse_args(argv)
    exercise = exercise_choice(parser, args.exercise)
    settings = resolve_settings(argparse.Namespace(seed=None, timeout=None, memory=None, backend=args.backend),
                                parser)
    _require_instructor_tools(parser, "grade sample-class")
    from ..integrations.course import CourseError
    from ..integrations.sample_class import SampleClassError, grade_students, write_manifest, write_sample_class

    try:
        students = write_sample_class(args.folder, exercise.id, force=args.force)
    except (SampleClassError, CourseError) as exc:
        parser.error(str(exc))
    console = report_console()
    with console.status(f"Grading the {len(students)} students once, for the manifest …", spinner="dots"):
        verdicts = grade_students(args.folder, exercise.id, students, settings)
    manifest = write_manifest(args.folder, exercise.id, students, verdicts)
    folder = args.folder.resolve()
    say(console, f"Wrote a sample class of {exercise.id} ({exercise.title}) into {folder}: {len(students)} students "
                 f"in submitted/<student>/{exercise.id}/, the exercise's nbgrader course (nbgrader_config.py, "
                 f"source/{exercise.id}/) and {manifest.name}, which says what each file is and what it scores.")
    say(console, "This folder holds answers (correct files, the course's solution): keep it away from students.",
        "yellow")
    width = max(len(student.id) for student in students)
    for student in students:
        verdict = verdicts[student.id]
        say(console, f"  {student.id:<{width}}  {verdict.status:<6} {verdict.score:g}/{verdict.max_score:g}  "
                     f"{student.what}")
    results = folder / "results"
    say(console, "Next:")
    for line in (f"grade batch {folder} --exercise {exercise.id} --out {results}",
                 f"  (the scores above; the class page: {results / 'report.html'}, again with "
                 f"grade class-report {results})",
                 f"cd {folder} && nbgrader generate_assignment {exercise.id} && nbgrader autograde {exercise.id} "
                 "--student notebook",
                 f"grade gradescope-autograder {exercise.id} --out {folder / 'autograder.zip'}",
                 "  (upload it to a Gradescope assignment, then submit any student's file)"):
        say(console, f"  {line}")
    return 0
