"""Wall time of `grade exercise3` on the solution, cold and warm, against `python -c "import tensorflow"`.

In one session, alternately, several rounds on the same machine:

- the import floor: `python -c "import tensorflow"`;
- a cold `grade --no-server`: a fresh grading process imports TensorFlow (target: at most 1.2 times
  the floor);
- a warm `grade`: a second call through the grading server, which has TensorFlow imported (target:
  at most 0.3 times the floor);
- a `--watch` re-grade: what watch mode does after a save, a request to the server and the report
  (target: at most 0.3 times the floor);

then the server's resident memory when idle (its process tree: the server, its worker and its judge
server), and where a re-grade's time goes: the grading process's start (the worker's fork, the
namespaces, the confinement), each of its phases (Keras building the layer, save and load, ...),
its end, the judge and the report, as medians over the rounds. The ratios of the medians are the
numbers to read. The server runs in a runtime folder of its own and is stopped at the end.

    python benchmarks/grade_speed.py [--rounds 7] [--backends]

With ``--backends`` it then measures every installed Keras backend cold: ``import keras`` on that
backend (its import floor: Keras and the backend's library) against ``grade exercise3 --backend
NAME --no-server``, each backend's medians and their ratio.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COLD_TARGET = 1.2
WARM_TARGET = 0.3


def timed(command: list[str], env: dict) -> float:
    started = time.perf_counter()
    result = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited with {result.returncode}")
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds (default 7)")
    parser.add_argument("--backends", action="store_true",
                        help="also measure every installed Keras backend's import floor and cold grading time")
    args = parser.parse_args()
    runtime = Path(tempfile.mkdtemp(prefix="grade-bench-", dir="/tmp"))
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", GRADE_SERVER="on", XDG_RUNTIME_DIR=str(runtime),
               GRADE_STATE_DIR=str(runtime / "state"))
    env.pop("GRADE_SERVER_IDLE", None)
    os.environ.update({k: env[k] for k in ("TF_CPP_MIN_LOG_LEVEL", "GRADE_SERVER", "XDG_RUNTIME_DIR",
                                           "GRADE_STATE_DIR")})
    grade = shutil.which("grade") or sys.executable
    grade_cmd = [grade] if grade != sys.executable else [sys.executable, "-m", "grader"]
    grade_cmd += ["exercise3", "--submission", str(ROOT / "solutions" / "exercise3.py"), "--json"]
    import_cmd = [sys.executable, "-c", "import tensorflow"]
    cold_cmd = [*grade_cmd, "--no-server"]
    try:
        timed(import_cmd, env)  # warm the file cache for all
        timed(cold_cmd, env)
        first = timed(grade_cmd, env)
        print(f"first grade, which starts the server (not counted): {first:.2f} s", flush=True)
        regrade = watch_regrade()
        regrade()  # the watch's own first grading, through the same server
        floors, colds, warms, watches = [], [], [], []
        for number in range(1, args.rounds + 1):
            floors.append(timed(import_cmd, env))
            colds.append(timed(cold_cmd, env))
            warms.append(timed(grade_cmd, env))
            watches.append(regrade())
            print(f"round {number}: import tensorflow {floors[-1]:.2f} s, cold grade {colds[-1]:.2f} s, "
                  f"warm grade {warms[-1]:.2f} s, --watch re-grade {watches[-1]:.2f} s", flush=True)
        memory = idle_memory(env, grade_cmd[:-4])
        parts = breakdown(args.rounds)
    finally:
        subprocess.run([*grade_cmd[:-4], "server", "stop"], env=env, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        shutil.rmtree(runtime, ignore_errors=True)

    floor = statistics.median(floors)
    print(f"\n{'':<34}{'median':>9}{'ratio':>8}{'target':>9}")
    print(f"{'import tensorflow (the floor)':<34}{floor:>7.2f} s")
    for name, values, target in (("cold grade (--no-server)", colds, COLD_TARGET),
                                 ("warm grade (through the server)", warms, WARM_TARGET),
                                 ("--watch re-grade", watches, WARM_TARGET)):
        ours = statistics.median(values)
        print(f"{name:<34}{ours:>7.2f} s{ours / floor:>8.2f}{'<= ' + str(target):>9}  "
              f"{'met' if ours / floor <= target else 'NOT met'}")
    each = ", ".join(f"{entry['role']} {entry['rss_kb'] / 1024:.0f} MB" for entry in memory["memory"])
    print(f"\nserver's resident memory when idle: {memory['rss_kb'] / 1024:.0f} MB ({each})")
    print("\nwhere a re-grade's time goes (medians; the worker's fork path, as the server grades):")
    for name, seconds in parts:
        print(f"  {name:<44}{seconds:>7.3f} s")
    if args.backends:
        measure_backends(cold_cmd, env, args.rounds)
    return 0


def watch_regrade():
    """What ``grade --watch`` does after each save, through the server: one grading and its report
    (rendered, not shown); returns a function that times one."""
    from rich.console import Console

    from grader import exercises
    from grader.api import Settings
    from grader.cli.grading import WarmGrader, grade_and_show

    exercise = exercises.get("exercise3")
    console = Console(file=io.StringIO(), width=100)
    grader = WarmGrader()

    def once() -> float:
        started = time.perf_counter()
        verdict = grade_and_show(exercise, exercise.solution, Settings(), console, watching=True, grader=grader)
        seconds = time.perf_counter() - started
        if verdict.status != "passed":
            raise SystemExit(f"a re-grade of the solution gave {verdict.status}")
        return seconds

    return once


def idle_memory(env: dict, grade: list[str]) -> dict:
    time.sleep(2)  # the last grading's processes collected
    out = subprocess.run([*grade, "server", "status", "--json"], env=env, capture_output=True, text=True).stdout
    return json.loads(out)


def breakdown(rounds: int) -> list[tuple[str, float]]:
    """Medians of each part of a re-grade by a worker of the batch's (the server's runner), measured
    here: the same fork, confinement, phases and judge."""
    from rich.console import Console

    from grader import exercises
    from grader.api import Grading, Settings
    from grader.workers import Workers
    from grader.report import render

    exercise = exercises.get("exercise3")
    workers = Workers()
    rows: dict[str, list[float]] = {}

    def add(name: str, seconds: float) -> None:
        rows.setdefault(name, []).append(seconds)

    try:
        Grading(exercise.id, exercise.solution, Settings(), runner=workers).finish()  # waits for the import
        for _ in range(rounds):
            started = time.perf_counter()
            grading = Grading(exercise.id, exercise.solution, Settings(), runner=workers)
            launched = time.perf_counter()
            run = grading.child.wait()
            ended = time.perf_counter()
            verdict = grading.finish()
            judged = time.perf_counter()
            Console(file=io.StringIO(), width=100).print(render(verdict))
            shown = time.perf_counter()
            phases = {name: record.get("seconds", 0.0) for name, record in run.phases.items()}
            start_up = run.seconds - (run.student_seconds or 0.0)
            add("reading the file, asking the worker to fork", launched - started)
            add("grading process: fork, namespaces, mounts", start_up - phases.get("runtime", 0.0))
            for name, seconds in phases.items():
                add(f"  phase {name}", seconds)
            add("grading process: leaving, its end collected",
                max(0.0, (ended - started) - (launched - started) - start_up - sum(
                    s for n, s in phases.items() if n != "runtime")))
            add("judge: evidence handed over, checks run", judged - ended)
            add("report", shown - judged)
            add("in all", shown - started)
    finally:
        workers.close()
    return [(name, statistics.median(values)) for name, values in rows.items()]


def measure_backends(cold_cmd: list[str], env: dict, rounds: int) -> None:
    """Each installed backend: the import floor (``import keras`` on it) and a cold ``grade --backend NAME``."""
    sys.path.insert(0, str(ROOT))
    from grader import backends

    rows = []
    for name in backends.available():
        floor_cmd = [sys.executable, "-c", "import keras; keras.ops.zeros(1)"]
        floor_env = dict(env, KERAS_BACKEND=name)
        command = [*cold_cmd, "--backend", name]
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
