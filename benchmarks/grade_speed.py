"""Wall time of `grade exercise3` on the solution against `python -c "import tensorflow"`.

Both commands run alternately in one session, several rounds, on the same
machine; the ratio of the medians is the number to read (target: at most 1.5).

    python benchmarks/grade_speed.py [--rounds 7] [--backends]

With ``--backends`` it then does the same for every installed Keras backend:
``import keras`` on that backend (its import floor: Keras and the backend's
library) against ``grade exercise3 --backend NAME``, each backend's medians
and their ratio.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = 1.5


def timed(command: list[str], env: dict) -> float:
    started = time.perf_counter()
    result = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    elapsed = time.perf_counter() - started
    if result.returncode not in (0,):
        raise SystemExit(f"{' '.join(command)} exited with {result.returncode}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds of both commands (default 7)")
    parser.add_argument("--backends", action="store_true",
                        help="also measure every installed Keras backend's import floor and grading time")
    args = parser.parse_args()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    grade = shutil.which("grade") or sys.executable
    grade_cmd = [grade] if grade != sys.executable else [sys.executable, "-m", "grader"]
    grade_cmd += ["exercise3", "--submission", str(ROOT / "solutions" / "exercise3.py"), "--json"]
    import_cmd = [sys.executable, "-c", "import tensorflow"]

    timed(import_cmd, env)  # warm the file cache for both
    timed(grade_cmd, env)
    imports, grades = [], []
    for round_number in range(1, args.rounds + 1):
        imports.append(timed(import_cmd, env))
        grades.append(timed(grade_cmd, env))
        print(f"round {round_number}: import tensorflow {imports[-1]:.2f} s, grade exercise3 {grades[-1]:.2f} s",
              flush=True)
    base, ours = statistics.median(imports), statistics.median(grades)
    ratio = ours / base
    print(f"\nmedian import tensorflow: {base:.2f} s")
    print(f"median grade exercise3:   {ours:.2f} s")
    print(f"ratio: {ratio:.2f} (target at most {TARGET}) — {'met' if ratio <= TARGET else 'NOT met'}")
    if args.backends:
        measure_backends(grade_cmd, env, args.rounds)
    return 0


def measure_backends(grade_cmd: list[str], env: dict, rounds: int) -> None:
    """Each installed backend: the import floor (``import keras`` on it) and ``grade --backend NAME``."""
    sys.path.insert(0, str(ROOT))
    from grader import backends

    rows = []
    for name in backends.available():
        floor_cmd = [sys.executable, "-c", "import keras; keras.ops.zeros(1)"]
        floor_env = dict(env, KERAS_BACKEND=name)
        command = [*grade_cmd, "--backend", name]
        timed(floor_cmd, floor_env)
        timed(command, env)
        floors, grades = [], []
        for round_number in range(1, rounds + 1):
            floors.append(timed(floor_cmd, floor_env))
            grades.append(timed(command, env))
            print(f"{name} round {round_number}: import floor {floors[-1]:.2f} s, grade {grades[-1]:.2f} s",
                  flush=True)
        rows.append((name, statistics.median(floors), statistics.median(grades)))
    print(f"\n{'backend':<12}{'import floor':>14}{'grade exercise3':>18}{'ratio':>8}")
    for name, floor, grade in rows:
        print(f"{name:<12}{floor:>12.2f} s{grade:>16.2f} s{grade / floor:>8.2f}")
    missing = [n for n in backends.NAMES if not backends.installed(n)]
    if missing:
        print(f"not installed here: {', '.join(missing)}")


if __name__ == "__main__":
    sys.exit(main())
