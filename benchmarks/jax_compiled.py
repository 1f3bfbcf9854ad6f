"""A JAX grading with and without the operations JAX compiled before (``grader.compiled``), side by side.

In one session, alternately, several rounds on the same machine, each a cold `grade --backend jax
--no-server` of an exercise's solution (and of one catalogued mistake, whose operations differ in
part from the solution's):

- without a folder of compiled operations (``GRADE_COMPILED=off``): JAX compiles every operation;
- with the folder filled, once, before the rounds (the fill's own time is printed: the first JAX
  grading of an exercise pays it once).

Prints the medians and their ratio (the target: a grading with the folder at most 0.6 times one
without), and the folder's size. The folder is a temporary one, removed at the end.

    python benchmarks/jax_compiled.py [--rounds 5] [--exercise exercise3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader import backends, compiled, exercises  # noqa: E402

TARGET = 0.6


def timed(submission: Path, exercise_id: str, environ: dict) -> float:
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "grader", exercise_id, "--submission", str(submission),
                             "--backend", "jax", "--no-server", "--json"], env=environ,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if result.returncode not in (0, 1):
        raise SystemExit(f"the grading of {submission.name} failed:\n{result.stderr[-2000:]}{result.stdout[-2000:]}")
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of each (default 5)")
    parser.add_argument("--exercise", default="exercise3", help="the exercise (default exercise3)")
    args = parser.parse_args()
    if not backends.installed("jax"):
        raise SystemExit("JAX is not installed here: pip install -e '.[jax]'")
    exercise = exercises.get(args.exercise)
    from tests.catalog import catalog

    work = Path(tempfile.mkdtemp(prefix="jax-compiled-"))
    try:
        solution = work / "solution" / f"{exercise.id}.py"
        solution.parent.mkdir()
        shutil.copy(exercise.solution, solution)
        mistakes, _ = catalog(exercise.id)
        mistake = work / "mistake" / f"{exercise.id}.py"
        mistake.parent.mkdir()
        mistake.write_text(mistakes[0].source, encoding="utf-8")
        base = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", GRADE_SERVER="off")
        without = dict(base, GRADE_COMPILED="off")
        with_folder = dict(base, GRADE_COMPILED=str(work / "compiled"))
        fill = timed(solution, exercise.id, with_folder)  # fills the folder, then grades
        folder = compiled.folder("jax", with_folder)
        if folder is None or not compiled.filled(exercise, "jax", with_folder):
            raise SystemExit("the folder was not filled (is Landlock available?)")
        size = sum(p.stat().st_size for p in folder.iterdir() if p.is_file())
        print(f"first grading (the solution's run fills the folder, then the grading): {fill:.1f} s; "
              f"{sum(1 for p in folder.iterdir() if p.is_file())} operations, {size / 1024:.0f} kB", flush=True)
        times: dict[tuple[str, str], list[float]] = {}
        for round_ in range(args.rounds):
            for name, submission in (("solution", solution), (f"mistake {mistakes[0].name}", mistake)):
                for kind, environ in (("without", without), ("with", with_folder)):
                    times.setdefault((name, kind), []).append(timed(submission, exercise.id, environ))
            print(f"round {round_ + 1}/{args.rounds} done", flush=True)
        met = True
        for name in ("solution", f"mistake {mistakes[0].name}"):
            a = statistics.median(times[(name, "without")])
            b = statistics.median(times[(name, "with")])
            met = met and b / a <= TARGET
            print(f"{name}: without the folder {a:.1f} s, with it {b:.1f} s: {b / a:.2f}x")
        print(f"target: at most {TARGET:g}x — {'met' if met else 'NOT met'}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
