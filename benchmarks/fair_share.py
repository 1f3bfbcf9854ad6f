"""A correct classmate beside a submission that spins every process it may start, side by side.

Grades, in one run on this machine, with `grade batch --jobs 3`:
  A. two correct exercise3 submissions alone;
  B. the same two beside a submission that forks as many spinning processes as it may (each
     asking for a session of its own) and keeps them spinning for 20 s;
  C. as B with the grader's control groups turned off (GRADE_CGROUPS=0): the process cap,
     the refused sessions and the lower priority alone.
and prints each classmate's grading time (summary.csv's seconds) in A, B and C. Target: a
classmate beside the spinner keeps a verdict within 10 s.

    python benchmarks/fair_share.py
"""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader import exercises  # noqa: E402

SOLUTION = exercises.get("exercise3").solution.read_text(encoding="utf-8")
STUB = exercises.get("exercise3").stub.read_text(encoding="utf-8")
SPINNER = '''
import os, time
for _ in range(200):
    try:
        pid = os.fork()
    except OSError:
        break
    if pid == 0:
        try:
            os.setsid()
        except OSError:
            pass
        end = time.time() + 60
        while time.time() < end:
            pass
        os._exit(0)
time.sleep(20)
''' + STUB
TARGET = 10.0


def batch(folder: Path, out: Path, **environment) -> dict[str, float]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", **environment)
    subprocess.run([sys.executable, "-m", "grader", "batch", str(folder), "--exercise", "exercise3", "--out",
                    str(out), "--jobs", "3", "--force"], env=env, stdout=subprocess.DEVNULL, check=False)
    with open(out / "summary.csv", encoding="utf-8") as handle:
        return {row["id"]: float(row["seconds"]) for row in csv.DictReader(handle)}


def main() -> None:
    with tempfile.TemporaryDirectory() as work:
        work = Path(work)
        alone, beside = work / "alone", work / "beside"
        for folder in (alone, beside):
            folder.mkdir()
            for name in ("classmate1", "classmate2"):
                (folder / f"{name}.py").write_text(SOLUTION, encoding="utf-8")
        (beside / "spinner.py").write_text(SPINNER, encoding="utf-8")
        runs = {
            "A alone": batch(alone, work / "a"),
            "B beside the spinner": batch(beside, work / "b"),
            "C beside it, no control groups": batch(beside, work / "c", GRADE_CGROUPS="0"),
        }
    print(f"{'run':34} {'classmate1':>11} {'classmate2':>11} {'spinner':>9}")
    for name, seconds in runs.items():
        spinner = f"{seconds['spinner']:.1f}" if "spinner" in seconds else "-"
        print(f"{name:34} {seconds['classmate1']:>10.1f}s {seconds['classmate2']:>10.1f}s {spinner:>9}")
    worst = max(max(s["classmate1"], s["classmate2"]) for name, s in runs.items() if name != "A alone")
    print(f"slowest classmate beside the spinner: {worst:.1f} s (target: at most {TARGET:g} s)")


if __name__ == "__main__":
    main()
