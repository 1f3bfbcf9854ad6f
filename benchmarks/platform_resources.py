"""What grading one submission needs of a container: memory, CPU time, and so the platform settings.

    python benchmarks/platform_resources.py [--exercise ID ...] [--repeat N]

Runs `grade EXERCISE --submission <reference solution> --json --no-server`, with
GRADE_SERVER=off, as run_autograder and a PrairieLearn entry point run it: the cold path of a
container, where one process imports TensorFlow and grades one submission. (Through a warm
grading server, `grade` would be a small client whose tree holds a few tens of MiB, and the
server's memory, outside that tree, would go unmeasured.) While it runs, it adds up the resident
memory of `grade` and every process under it, sampled every 20 ms from /proc. After it ends, the CPU seconds of the
whole tree (user + system). Gradescope gives an autograder half a CPU by default and PrairieLearn
a CPU share you do not choose, so wall-clock times are estimated from CPU seconds: at half a CPU a
single-threaded run takes at least twice its CPU seconds. Prints one line per run and the
settings that follow (memory with a 1.5x margin, rounded up to Gradescope's choices).
Linux only (it reads /proc).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader import exercises  # noqa: E402

GRADESCOPE_MEMORY_GB = (0.75, 1.5, 3.0, 6.0)  # the RAM that comes with 0.5, 1, 2 and 4 CPUs
PAGE = os.sysconf("SC_PAGE_SIZE")


def tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and all its descendants."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/statm") as handle:
                rss[int(entry)] = int(handle.read().split()[1]) * PAGE
        except (OSError, IndexError, ValueError):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    total, stack = 0, [pid]
    while stack:
        current = stack.pop()
        total += rss.get(current, 0)
        stack.extend(children.get(current, []))
    return total


def cold_command(exercise_id: str) -> tuple[list[str], dict[str, str]]:
    """The command and environment of one grading as a platform's container runs it: no grading
    server, whatever this machine has running or set (run_autograder exports GRADE_SERVER=off)."""
    grade = Path(sys.executable).with_name("grade")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", GRADE_STATE_DIR=tempfile.mkdtemp(), GRADE_SERVER="off")
    return [str(grade), exercise_id, "--submission", str(exercises.get(exercise_id).solution), "--json",
            "--no-server"], env


def measure(exercise_id: str) -> dict:
    command, env = cold_command(exercise_id)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    peak = 0
    done = threading.Event()

    def sample():
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(process.pid))
            time.sleep(0.02)

    sampler = threading.Thread(target=sample)
    sampler.start()
    stdout, stderr = process.communicate()
    done.set()
    sampler.join()
    seconds = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    verdict = json.loads(stdout)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"exercise": exercise_id, "status": verdict["status"], "wall": seconds, "cpu": cpu,
            "peak_mb": peak / 2**20}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--exercise", action="append", choices=list(exercises.EXERCISES),
                        help="exercises to measure (default: all)")
    parser.add_argument("--repeat", type=int, default=1, help="runs per exercise (default 1)")
    args = parser.parse_args()
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs here")
    runs = []
    for exercise_id in args.exercise or list(exercises.EXERCISES):
        for _ in range(args.repeat):
            run = measure(exercise_id)
            runs.append(run)
            print(f"{exercise_id}: {run['status']}, {run['wall']:.1f} s wall, {run['cpu']:.1f} CPU s, "
                  f"peak memory {run['peak_mb']:.0f} MiB (grade and its child together, no grading server)")
    peak = max(r["peak_mb"] for r in runs)
    cpu = max(r["cpu"] for r in runs)
    need = peak * 1.5 / 1024
    tier = next((gb for gb in GRADESCOPE_MEMORY_GB if gb >= need), GRADESCOPE_MEMORY_GB[-1])
    print(f"largest: {peak:.0f} MiB, {cpu:.1f} CPU s")
    print(f"Gradescope: with a 1.5x margin {need:.2f} GB of RAM -> choose at least {tier:g} GB; "
          f"at half a CPU one run takes at least {2 * cpu:.0f} s, at 2 CPUs about {cpu:.0f} s or less.")
    print(f"PrairieLearn: a timeout of at least {max(60, 3 * cpu):.0f} s leaves 3x the CPU seconds of one run.")
    return 0 if all(r["status"] == "passed" for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
