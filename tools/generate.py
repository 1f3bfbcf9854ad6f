"""Keeps the repository's generated exercise files in step with the solutions (the single source).

    python -m tools.generate          # rewrite exercises/*.py and solutions/nbgrader/ from solutions/*.py
    python -m tools.generate --check  # exit 1 if a committed file has drifted

The stubs come from ``grader.exercises.stubs``, the nbgrader course from
``grader.integrations.course``: the same code ``grade init``, the wheel's build and
``grade nbgrader-course`` use.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from grader import exercises
from grader.exercises.stubs import expected_solution, make_stub

COURSE = exercises.PROJECT_ROOT / "solutions" / "nbgrader"


def drifted_course() -> list[str]:
    """The committed course's files that are missing or differ from what is written now."""
    return _course(check=True)


def _course(check: bool) -> list[str]:
    """Keep the committed nbgrader course (solutions/nbgrader) equal to what
    ``grade nbgrader-course`` writes; return the drifted files when checking."""
    import tempfile

    from grader.integrations.course import write_course

    with tempfile.TemporaryDirectory() as scratch:
        fresh = {p.relative_to(scratch): p.read_bytes() for p in write_course(Path(scratch))}
    drifted = []
    for relative, data in fresh.items():
        target = COURSE / relative
        if target.exists() and target.read_bytes() == data:
            continue
        if check:
            drifted.append(str(target))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            print(f"wrote {target}")
    return drifted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.generate", description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="report drifted stubs instead of rewriting them")
    args = parser.parse_args(argv)
    if exercises.INSTALLED_FROM_WHEEL:
        print("python -m tools.generate keeps a clone of the repository in step with its solutions; "
              f"this is an installed package ({exercises.PACKAGE_DIR}), whose files it leaves alone.")
        return 2
    from grader.extras import missing_instructor_tools

    why = missing_instructor_tools("python -m tools.generate")  # it writes the nbgrader course too
    if why:
        print(why, file=sys.stderr)
        return 2
    drifted = []
    for exercise in exercises.EXERCISES.values():
        solution = expected_solution(exercise)
        if solution != exercise.solution.read_text(encoding="utf-8"):
            if args.check:
                drifted.append(str(exercise.solution))
            else:
                exercise.solution.write_text(solution, encoding="utf-8")
                print(f"wrote {exercise.solution}")
        stub = make_stub(solution)
        current = exercise.stub.read_text(encoding="utf-8") if exercise.stub.exists() else None
        if current == stub:
            continue
        if args.check:
            drifted.append(str(exercise.stub))
        else:
            exercise.stub.write_text(stub, encoding="utf-8")
            print(f"wrote {exercise.stub}")
    drifted += _course(args.check)
    if drifted:
        print("out of date with the solutions (run python -m tools.generate):", *drifted, sep="\n  ")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
