"""Wall time of a re-grade in `grade --watch --no-server` against `python -c "import tensorflow"`.

Without the grading server, watch mode keeps a worker of its own with
TensorFlow imported; each re-grade is a fresh child forked from it (the same
confinement as a cold `grade`), then the parent's checks and the report. This
measures, alternately in one session, a re-grade of exercise 3's solution
exactly as that watch mode does it after a save (the first grading, which
waits for the worker's import, is not counted) and a fresh
`python -c "import tensorflow"`; the ratio of the medians is the number to read
(target: at most 0.3). A cold `grade` is measured too, for scale.
`benchmarks/grade_speed.py` measures the watch through the server, beside a
cold and a warm `grade`.

    python benchmarks/watch_speed.py [--rounds 7] [--exercise exercise3]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = 0.3


def import_seconds(env: dict) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import tensorflow"], check=True, env=env,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds (default 7)")
    parser.add_argument("--exercise", default="exercise3", help="the exercise whose solution is re-graded")
    args = parser.parse_args()
    os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
    env = dict(os.environ)

    from rich.console import Console

    from grader import exercises
    from grader.workers import Workers
    from grader.cli.grading import grade_and_show
    from grader.api import Settings

    exercise = exercises.get(args.exercise)
    submission = exercise.solution
    console = Console(file=io.StringIO(), width=100)  # the report is rendered, as watch mode does, not shown
    settings = Settings()

    def regrade(runner=None) -> tuple[float, str]:
        started = time.perf_counter()
        verdict = grade_and_show(exercise, submission, settings, console, watching=True, runner=runner)
        return time.perf_counter() - started, verdict.status

    import_seconds(env)  # warm the file cache
    workers = Workers()
    try:
        first, status = regrade(workers)
        if status != "passed":
            raise SystemExit(f"the solution of {exercise.id} did not pass through the worker ({status})")
        print(f"first grading through the worker (waits for its import): {first:.2f} s", flush=True)
        cold, _ = regrade()
        print(f"a cold grade, for scale: {cold:.2f} s", flush=True)
        imports, regrades = [], []
        for round_number in range(1, args.rounds + 1):
            imports.append(import_seconds(env))
            seconds, status = regrade(workers)
            if status != "passed":
                raise SystemExit(f"a re-grade of the solution gave {status}")
            regrades.append(seconds)
            print(f"round {round_number}: import tensorflow {imports[-1]:.2f} s, re-grade {regrades[-1]:.2f} s",
                  flush=True)
    finally:
        workers.close()
    base, ours = statistics.median(imports), statistics.median(regrades)
    ratio = ours / base
    print(f"\nmedian import tensorflow: {base:.2f} s")
    print(f"median re-grade in watch mode: {ours:.2f} s")
    print(f"ratio: {ratio:.2f} (target at most {TARGET}) — {'met' if ratio <= TARGET else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
