"""Wall time of the test suite's two tiers, the ten slowest files of each, and the catalogue recorded
afresh against replayed.

The README's test command (``python -m pytest``, the default tier) should pass in at most 8
minutes on a 2-core machine with a cold cache (target: TARGET_SECONDS); the slow tier
(``python -m pytest -m slow``) is the exhaustive rest, which ``.ci/run`` runs as a step of its
own. By default both run from a cold cache (nothing recorded before, as on CI's fresh machine: the
default tier records the catalogue's evidence, the slow tier replays it); ``--warm`` uses the
evidence kept from earlier runs. ``--catalog`` measures ``tests/test_catalog.py`` with every recording thrown
away (what a first run, or a change to the grading process's code, costs), then again replaying
them (what a change to a check costs). Each run's load average is printed beside its time: on a
shared machine the times mean little without it. The suite runs in parallel test processes
(``-n auto`` in pyproject.toml; ``-- -n 0`` times it in one).

    python benchmarks/suite_speed.py                  # both tiers, cold
    python benchmarks/suite_speed.py --tier default   # the README's command only
    python benchmarks/suite_speed.py --catalog        # the catalogue, recorded then replayed
    python benchmarks/suite_speed.py -- -x            # anything after -- goes to pytest
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_SECONDS = 8 * 60
TIERS = {"default": [], "slow": ["-m", "slow"]}


def timed(arguments: list[str], cache: Path | None) -> tuple[float, int, str, dict[str, float], list[str]]:
    """(seconds, pytest's exit status, its last line, {file: seconds}, the tests that did not pass) of one
    pytest run in the clone;
    with ``cache``, pytest's cache and the catalogue's evidence are kept there, not in their usual places."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    if cache is not None:
        env["GRADE_EVIDENCE_CACHE"] = str(cache / "evidence")
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "junit.xml"
        options = ["-o", f"cache_dir={cache / 'pytest'}"] if cache is not None else []
        started = time.perf_counter()
        result = subprocess.run([sys.executable, "-m", "pytest", "-q", f"--junitxml={report}", *options,
                                 *arguments], cwd=ROOT, env=env, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        files = file_times(report) if report.is_file() else {}
        failed = failures(report) if report.is_file() else []
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    return seconds, result.returncode, lines[-1] if lines else result.stderr.strip()[-300:], files, failed


def file_times(report: Path) -> dict[str, float]:
    """{test file: seconds} from a JUnit report (each test's time includes its fixtures' setup)."""
    times: dict[str, float] = collections.Counter()
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        name = (case.get("classname") or "").split(".")
        times[f"{name[1] if len(name) > 1 else name[0]}.py"] += float(case.get("time") or 0)
    return dict(times)


def failures(report: Path) -> list[str]:
    """The tests of a JUnit report that failed or errored, each with the first line of why."""
    found = []
    for case in ElementTree.parse(report).getroot().iter("testcase"):
        for outcome in ("failure", "error"):
            element = case.find(outcome)
            if element is not None:
                why = (element.get("message") or "").strip().splitlines()
                found.append(f"{case.get('classname')}::{case.get('name')} ({outcome}: {why[0][:160] if why else ''})")
    return found


def load() -> str:
    return ", ".join(f"{value:.1f}" for value in os.getloadavg())


def report(name: str, arguments: list[str], cache: Path | None, slowest: int = 10) -> tuple[float, int]:
    before = load()
    seconds, status, last, files, failed = timed(arguments, cache)
    print(f"{name}: {seconds:7.1f} s  (exit {status}; load average {before} before, {load()} after)")
    print(f"    {last}")
    for test in failed:
        print(f"    did not pass: {test}")
    if files:  # the suite runs in several test processes (-n auto): these sum over them, beyond the wall time
        print("    the slowest files, test time summed over the test processes:")
    for file, spent in sorted(files.items(), key=lambda item: -item[1])[:slowest]:
        print(f"    {spent:7.1f} s  {file}")
    return seconds, status


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tier", choices=[*TIERS, "both"], default="both", help="which tier to time (both)")
    parser.add_argument("--warm", action="store_true",
                        help="use the clone's own pytest cache (the evidence kept by earlier runs), not a fresh one")
    parser.add_argument("--catalog", action="store_true",
                        help="time tests/test_catalog.py recorded afresh, then replayed")
    parser.add_argument("pytest_args", nargs="*", help="more arguments for pytest (after --)")
    args = parser.parse_args()
    print(f"{os.cpu_count()} cores; Python {sys.version.split()[0]}")
    if args.catalog:
        recorded, first = report("catalogue, recorded", ["tests/test_catalog.py", "--record-evidence",
                                                          *args.pytest_args], None)
        replayed, second = report("catalogue, replayed", ["tests/test_catalog.py", *args.pytest_args], None)
        print(f"replaying takes {replayed / recorded:.2f} of recording")
        return 0 if first == second == 0 else 1
    statuses = []
    with tempfile.TemporaryDirectory() as scratch:
        for tier in (TIERS if args.tier == "both" else [args.tier]):
            cache = None if args.warm else Path(scratch)  # cold: fresh for the first tier, shared after, as in CI
            seconds, status = report(f"{tier} tier{'' if args.warm else ', cold cache'}",
                                     [*TIERS[tier], *args.pytest_args], cache)
            statuses.append(status)
            if tier == "default":
                met = seconds <= TARGET_SECONDS
                print(f"    target: at most {TARGET_SECONDS / 60:.0f} minutes: {'met' if met else 'not met'}")
                statuses.append(0 if met else 1)
    return 0 if not any(statuses) else 1


if __name__ == "__main__":
    sys.exit(main())
