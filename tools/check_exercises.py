"""Verifies every exercise as a unit, the way a contributor adding one needs to know it is whole.

    python -m tools.check_exercises              # every exercise; grades each solution and stub
    python -m tools.check_exercises exercise3    # one exercise
    python -m tools.check_exercises --no-grade   # only what needs no grading (seconds, no TensorFlow)

For each exercise: its folder holds a spec, a job, a probe and checks; the checks declare points on
known topics with ids of their own; the job's public part is plain data; the solution carries
solution markers and the committed stub is the one generated from it; the instructions and hints
read as the tools read them, and every check a hint names exists; the catalogue of mistakes and
variants exists and loads, and its verdicts are kept (``tests/golden/<id>.json``); the notebook
builds (its visible test compiles) and the committed course's copy of it is current; then, graded
through the batch's warm worker, the solution earns full marks and the stub earns none. An exercise
folder the registry refuses (a spec without an ``__init__.py``, a place in its track that is missing
or taken) is reported before anything else. Exit 1 when anything is wrong, with what and where.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import os
import sys
import tempfile
from pathlib import Path

try:
    from grader import exercises
except ImportError as refused:  # the registry refuses an exercise's folder: that is the one problem to say
    sys.exit(f"the exercises' registry refuses an exercise: {refused}")
from grader.exercises.stubs import BEGIN, expected_solution, make_stub
from grader.verdict import TOPICS
from grader.judging.declarations import declared_checks


def static_problems(exercise) -> list[str]:
    """What is wrong with the exercise that can be seen without grading anything."""
    problems = []
    for part in ("spec", "job", "probe", "checks"):
        if not (exercise.folder / f"{part}.py").is_file():
            problems.append(f"{exercise.folder}/{part}.py is missing")
    if problems:
        return problems
    try:
        declared = declared_checks(exercise)
    except Exception as exc:  # the check module does not import: say so, and go on with the rest
        problems.append(f"{exercise.checks} does not import ({type(exc).__name__}: {exc})")
        declared = []
    ids = [d["id"] for d in declared]
    if exercise.checks.is_file() and not declared:
        problems.append(f"{exercise.checks} declares no check")
    for repeated in sorted({i for i in ids if ids.count(i) > 1}):
        problems.append(f"{exercise.checks} declares {repeated} more than once")
    for d in declared:
        if d["topic"] not in TOPICS or d["points"] <= 0:
            problems.append(f"{d['id']}: topic {d['topic']!r} and {d['points']:g} points")
    from grader.exercises.spec import PARTS

    if not exercise.parts or not set(exercise.parts) <= set(PARTS):
        problems.append(f"{exercise.folder}/spec.py: parts {exercise.parts!r} must name some of {', '.join(PARTS)}")
    try:
        json.dumps(exercise.public_job())
    except Exception as exc:
        problems.append(f"{exercise.folder}/job.py: public() is not plain data ({type(exc).__name__}: {exc})")
    if not exercise.solution.is_file():
        problems.append(f"{exercise.solution} is missing")
    else:
        solution = exercise.solution.read_text(encoding="utf-8")
        if not any(BEGIN.match(line) for line in solution.splitlines()):
            problems.append(f"{exercise.solution} has no ### BEGIN SOLUTION marker")
        try:
            expected = make_stub(expected_solution(exercise))
        except Exception as exc:
            problems.append(f"{exercise.solution}: no stub can be made of it ({exc})")
        else:
            if not exercise.stub.is_file() or exercise.stub.read_text(encoding="utf-8") != expected:
                problems.append(f"{exercise.stub} is not the stub of its solution (run python -m tools.generate)")
    if not exercise.instructions.is_file():
        problems.append(f"{exercise.instructions} is missing")
    if not exercise.hints.is_file():
        problems.append(f"{exercise.hints} is missing")
    else:
        from grader.student.hints import read_tagged_hints

        try:
            for hint in read_tagged_hints(exercise.hints):
                for named in hint.checks:
                    if named not in ids:
                        problems.append(f"{exercise.hints}, hint {hint.number}, names {named}, which is no check")
        except ValueError as exc:
            problems.append(str(exc))
    try:
        compile(exercise.notebook.visible_test, f"{exercise.id}'s visible test", "exec")
    except SyntaxError as exc:
        problems.append(f"{exercise.folder}/spec.py: the visible test does not compile ({exc})")
    catalogue = exercises.PROJECT_ROOT / "tests" / "catalog" / f"{exercise.id}.py"
    if not exercises.INSTALLED_FROM_WHEEL:
        if not catalogue.is_file():
            problems.append(f"{catalogue} is missing: every exercise has a catalogue of mistakes and variants")
        else:
            try:
                sys.path.insert(0, str(exercises.PROJECT_ROOT))
                module = importlib.import_module(f"tests.catalog.{exercise.id}")
                if not getattr(module, "MISTAKES", None) or not hasattr(module, "VARIANTS"):
                    problems.append(f"{catalogue} defines no MISTAKES (and VARIANTS)")
            except Exception as exc:
                problems.append(f"{catalogue} does not load ({type(exc).__name__}: {exc})")
            finally:
                sys.path.remove(str(exercises.PROJECT_ROOT))
        golden = exercises.PROJECT_ROOT / "tests" / "golden" / f"{exercise.id}.json"
        if not golden.is_file():
            problems.append(f"{golden} is missing: the catalogue's verdicts are kept for review (python -m pytest "
                            "tests/test_golden_verdicts.py --update-golden writes it)")
    from grader.extras import missing_instructor_tools

    if missing_instructor_tools("") is None:
        from grader.integrations.course import build_notebook

        try:
            build_notebook(exercise)
        except Exception as exc:
            problems.append(f"the nbgrader notebook cannot be built ({type(exc).__name__}: {exc})")
        else:
            if not exercises.INSTALLED_FROM_WHEEL:
                problems += [f"{path} is not the course's notebook of the solution (run python -m tools.generate)"
                             for path in _drifted_course() if f"{os.sep}{exercise.id}{os.sep}" in path]
    return problems


@functools.lru_cache(maxsize=1)
def _drifted_course() -> tuple[str, ...]:
    """The committed nbgrader course's files (solutions/nbgrader) that differ from what is written now."""
    from tools.generate import drifted_course

    return tuple(drifted_course())


def graded_problems(chosen: list) -> dict[str, list[str]]:
    """Grade each exercise's solution (full marks expected) and stub (none expected), two at a time
    through the batch's warm worker."""
    from grader.api import Settings, grade_pairs
    from grader.workers import Workers

    problems: dict[str, list[str]] = {exercise.id: [] for exercise in chosen}
    with tempfile.TemporaryDirectory() as scratch:
        items = []
        for exercise in chosen:
            solution_copy = Path(scratch) / exercise.id / "solution" / f"{exercise.id}.py"
            stub_copy = Path(scratch) / exercise.id / "stub" / f"{exercise.id}.py"
            for path, text in ((solution_copy, exercise.solution.read_text(encoding="utf-8")),
                               (stub_copy, make_stub(expected_solution(exercise)))):
                path.parent.mkdir(parents=True)
                path.write_text(text, encoding="utf-8")
            items += [(exercise.id, solution_copy), (exercise.id, stub_copy)]
        runner = Workers()
        try:
            graded = list(grade_pairs(items, Settings(seed=0), runner=runner))
        finally:
            runner.close()
        for exercise_id, path, verdict in graded:
            if path.parent.name == "solution" and (verdict.status != "passed" or verdict.score != verdict.max_score):
                failed = [c.id for c in verdict.checks if c.status != "passed"]
                problems[exercise_id].append(f"the solution earns {verdict.score:g}/{verdict.max_score:g} "
                                             f"({verdict.error or 'not passed: ' + ', '.join(failed)})")
            if path.parent.name == "stub" and verdict.score != 0:
                earned = [c.id for c in verdict.checks if c.points]
                problems[exercise_id].append(f"the stub earns {verdict.score:g} point{'' if verdict.score == 1 else 's'} "
                                             f"({', '.join(earned)})")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.check_exercises", description=__doc__.split("\n\n")[0])
    parser.add_argument("exercise", nargs="*", help="exercise ids (default: every exercise)")
    parser.add_argument("--no-grade", action="store_true", help="skip grading the solutions and stubs")
    args = parser.parse_args(argv)
    try:
        chosen = [exercises.get(e) for e in args.exercise] or list(exercises.EXERCISES.values())
    except KeyError as exc:
        parser.error(exc.args[0])
    problems = {exercise.id: static_problems(exercise) for exercise in chosen}
    if not args.no_grade:
        for exercise_id, found in graded_problems(chosen).items():
            problems[exercise_id] += found
    for exercise in chosen:
        found = problems[exercise.id]
        print(f"{'✓' if not found else '✗'} {exercise.id} — {exercise.title}")
        for problem in found:
            print(f"    {problem}")
    return 1 if any(problems.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
