"""Wall time of the test suite, and of the catalogue recorded afresh against replayed.

The README's test command (``python -m pytest``) should pass in at most 8
minutes on a 2-core machine once the catalogue's evidence is kept (target:
TARGET_SECONDS). The catalogue's gradings are recorded once per change of what
they depend on and replayed after (tests/recorded.py): ``--catalog`` measures
``tests/test_catalog.py`` with every recording thrown away (what a first run,
or a change to the grading process's code, costs), then again replaying them
(what a change to a check costs). Each run's load average is printed beside its
time: on a shared machine the times mean little without it.

    python benchmarks/suite_speed.py              # the whole suite, as the README runs it
    python benchmarks/suite_speed.py --catalog    # the catalogue, recorded then replayed
    python benchmarks/suite_speed.py -- -m "not slow"   # anything after -- goes to pytest

Runs pytest in this clone, with its own cache folder (``.pytest_cache``): the
recordings it keeps are the ones the suite uses next time.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_SECONDS = 8 * 60


def timed(arguments: list[str]) -> tuple[float, int, str]:
    """(seconds, pytest's exit status, its last line) of one pytest run in the clone."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    started = time.perf_counter()
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", *arguments], cwd=ROOT, env=env,
                            capture_output=True, text=True)
    seconds = time.perf_counter() - started
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    return seconds, result.returncode, lines[-1] if lines else result.stderr.strip()[-300:]


def load() -> str:
    return ", ".join(f"{value:.1f}" for value in os.getloadavg())


def report(name: str, arguments: list[str]) -> tuple[float, int]:
    before = load()
    seconds, status, last = timed(arguments)
    print(f"{name}: {seconds:7.1f} s  (exit {status}; load average {before} before, {load()} after)")
    print(f"    {last}")
    return seconds, status


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--catalog", action="store_true",
                        help="time tests/test_catalog.py recorded afresh, then replayed")
    parser.add_argument("pytest_args", nargs="*", help="more arguments for pytest (after --)")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores; Python {sys.version.split()[0]}")
    if args.catalog:
        recorded, first = report("catalogue, recorded", ["tests/test_catalog.py", "--record-evidence",
                                                          *args.pytest_args])
        replayed, second = report("catalogue, replayed", ["tests/test_catalog.py", *args.pytest_args])
        print(f"replaying takes {replayed / recorded:.2f} of recording")
        return 0 if first == second == 0 else 1
    seconds, status = report("suite", args.pytest_args)
    met = seconds <= TARGET_SECONDS
    print(f"target: at most {TARGET_SECONDS / 60:.0f} minutes: {'met' if met else 'not met'}")
    return 0 if status == 0 and met else 1


if __name__ == "__main__":
    sys.exit(main())
