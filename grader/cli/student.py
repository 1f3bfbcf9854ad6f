"""``grade init``, ``grade list`` and ``grade hint``: the student's workspace, progress and hints."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .. import exercises
from ..verdict import EXIT_ERROR
from ..exercises import tracks
from .common import exercise_choice, current_tracks, report_console, resolve_settings, say
from .grading import find_working_copy


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

    from ..student.workspace import WorkspaceConflict, init_workspace

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


def list_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="grade list",
        description="List the exercises with the state of your working copies: not started, "
                    "failing or passed, the score, and what to do next. Files edited since their "
                    "last grading are graded now.",
    )
    parser.add_argument("--json", action="store_true",
                        help='print [{"id", "title", "stub", "solution", "solution_is_answer"}, ...] (solution: '
                             "the reference answer's file) and grade nothing")
    parser.add_argument("--edition", choices=tracks.names(),
                        help="list this edition's exercises (default: those of the workspace you are in; in a "
                             f"clone, which holds every edition, edition {tracks.DEFAULT})")
    args = parser.parse_args(argv)
    found = current_tracks(args.edition)
    if args.json:
        # "solution" is the reference answer, which a tool may need (a course's build, a checker):
        # labelled, so nobody reads it as a file to start from
        print(json.dumps([{"id": e.id, "title": e.title, "stub": str(find_working_copy(e) or e.stub),
                           "solution": str(e.solution), "solution_is_answer": True}
                          for e in (exercises.get(i) for track in found for i in track.exercises)], indent=2))
        return 0
    # a clone holds every edition's files: its own edition is the one `grade init` writes by default
    listed = [track for track in found if track.name == tracks.DEFAULT] if len(found) > 1 else found
    shown = [exercises.get(i) for track in listed for i in track.exercises]

    from ..report import progress_table

    console = report_console()
    states = {row["id"]: row for row in exercise_states(console, shown)}
    for track in listed:
        console.print(progress_table([states[i] for i in track.exercises], track.chapter))
    for track in found:
        if track not in listed:
            say(console, f"This clone also holds the exercises of {track.chapter}: grade list --edition "
                         f"{track.name}.", "dim")
    states = list(states.values())
    if any(row["state"] == "no workspace" for row in states):
        say(console, f"No exercises/ folder in {Path.cwd()} or above it: `grade init DIR` writes a workspace "
                     "with every exercise; run grade inside it.")
    return 0


def exercise_states(console, shown=None) -> list[dict]:
    """One row per exercise (of ``shown``, else of every one): state, score and next step, grading
    files not yet graded as they are."""
    from ..student import progress
    from ..api import grade_pairs
    from ..exercises.stubs import expected_solution, make_stub

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


def hint_command(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="grade hint",
        description="Show a hint for the first problem your report starts with: your working copy is graded "
                    "(or its last grading reused, if the file has not changed since), and the least revealing "
                    "hint for that problem is shown; each call after that shows a more detailed one.",
    )
    parser.add_argument("exercise", nargs="?",
                        help=f"one of {', '.join(exercises.EXERCISES)} (default: the exercise of this workspace "
                             "graded last)")
    parser.add_argument("--submission", type=Path, metavar="PATH",
                        help="choose the hint for this .py file or .ipynb notebook instead of your working copy")
    parser.add_argument("--all", action="store_true", help="show every hint at once")
    parser.add_argument("--reset", action="store_true", help="start again from the first hint")
    args = parser.parse_args(argv)
    exercise = exercise_choice(parser, args.exercise if args.exercise is not None else _last_graded(parser))

    from ..student import progress
    from ..student.hints import read_tagged_hints

    hints = read_tagged_hints(exercise.hints)
    console = report_console()
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
        from ..student.hints import choose

        root = causes[0][0]
        chosen = choose(hints, causes[0], progress.next_cause_hint(exercise.id, root))
        if chosen is not None:
            from dataclasses import replace

            hint, place, count = chosen
            # numbered among the hints for this cause: a first hint is "hint 1 of 2, for ...", whatever
            # its place in the exercise's hints file
            _show_hint(console, exercise, replace(hint, number=place + 1), count, root)
            every = f"`grade hint {exercise.id} --all` shows every hint."
            more = (f"Still stuck there? `grade hint {exercise.id}` again gives a more detailed one."
                    if place + 1 < count else f"That is the only hint for it; {every}" if count == 1
                    else f"That is the most detailed hint for it; {every}")
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
    from ..student import progress

    last = progress.last_verdict(path)
    if last is not None and "causes" in last:
        return last
    from ..api import grade

    with console.status(f"Grading {path} to find the hint you need …", spinner="dots"):
        verdict = grade(exercise.id, path, settings)
    progress.record_verdict(verdict)
    return progress.last_verdict(path)


def _last_graded(parser) -> str:
    """The exercise of this workspace (or of the clone's exercises/) graded last; without one, the
    command exits naming `grade hint EXERCISE`."""
    from .common import workspace_exercises_folder
    from ..student import progress

    folder = workspace_exercises_folder()
    if folder is None and not exercises.INSTALLED_FROM_WHEEL:
        folder = exercises.EXERCISES_DIR
    last = progress.last_graded_exercise(folder, exercises.EXERCISES) if folder is not None else None
    if last is None:
        where = f"in {folder}" if folder is not None else "here (no workspace: `grade init DIR` writes one)"
        parser.exit(EXIT_ERROR, f"grade hint: no exercise was graded {where} yet, so there is none to choose. "
                                f"Name it: grade hint EXERCISE (one of {', '.join(current_tracks()[0].exercises)}).\n")
    return last


def _show_hint(console, exercise, hint, count: int, check_id: str | None = None) -> None:
    from rich.markdown import Markdown
    from rich.panel import Panel

    title = f"{exercise.id} — hint {hint.number} of {count}" + (f", for {check_id}" if check_id else "")
    console.print(Panel(Markdown(hint.text), title=title, title_align="left", border_style="cyan"))
