"""What a large submission costs the grader's own process, beside a small one, side by side.

    python benchmarks/large_submissions.py [--sizes 2000000 20000000]

For each size, a correct exercise 3 encoder followed by a pasted table of numbers (the costliest
Python to parse for its size), as a .py file and as a notebook, is graded by a cold
`grade --submission ... --json --no-server` and by `grade batch` (one file per run), and the peak
resident memory of the grader's own process (its children, the grading process and the worker,
are not counted) is printed beside that of a small file's. Then what parsing the same text would
cost if it were parsed (a fresh `compile` in a process of its own): what the bound on code
(`grader.submission.MAX_SOURCE_BYTES`) spares each process.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader import exercises  # noqa: E402
from grader.submission import MAX_SOURCE_BYTES  # noqa: E402

SOLUTION = exercises.get("exercise3").solution.read_text(encoding="utf-8")
PEAK = """
import resource, sys
from grader import cli
code = cli.main(sys.argv[1:])
print("PEAK", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024, "EXIT", code, file=sys.stderr)
"""
COMPILE = """
import resource, sys
text = open(sys.argv[1], encoding="utf-8").read()
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
compile(text, "x", "exec")
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) // 1024)
"""


def with_table(size: int) -> str:
    row = ", ".join(f"{i % 97}" for i in range(40)) + ",\n"
    return SOLUTION + "\nTABLE = [\n" + row * ((size - len(SOLUTION)) // len(row) + 1) + "]\n"


def notebook(code: str) -> str:
    cell = {"cell_type": "code", "execution_count": None, "metadata": {}, "source": code, "outputs": []}
    return json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5})


def peak(argv: list[str]) -> tuple[int, int]:
    done = subprocess.run([sys.executable, "-c", PEAK, *argv], capture_output=True, text=True, cwd=ROOT,
                          env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    fields = [line for line in done.stderr.splitlines() if line.startswith("PEAK ")][-1].split()
    return int(fields[1]), int(fields[3])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", type=int, default=[2_000_000, 20_000_000])
    args = parser.parse_args()
    print(f"bound on code: {MAX_SOURCE_BYTES // 1024} KiB")
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        cases = {"small (a syntax error)": (".py", SOLUTION.replace("class TransformerEncoder(",
                                                                   "class TransformerEncoder((", 1))}
        for size in args.sizes:
            cases[f"{size / 1e6:g} MB file"] = (".py", with_table(size))
            cases[f"{size / 1e6:g} MB notebook"] = (".ipynb", notebook(with_table(size)))
        print(f"{'submission':<24} {'grade (MB)':>11} {'batch (MB)':>11} {'a parse would cost (MB)':>24}")
        for index, (name, (suffix, text)) in enumerate(cases.items()):
            folder = scratch / f"case{index}"
            folder.mkdir()
            path = folder / f"exercise3{suffix}"
            path.write_text(text, encoding="utf-8")
            cold, _ = peak(["exercise3", "--submission", str(path), "--json", "--no-server"])
            batch, _ = peak(["batch", str(folder), "--exercise", "exercise3", "--out", str(scratch / f"out{index}"),
                             "--jobs", "1"])
            source = folder / "source.txt"
            source.write_text(with_table(int(name.split()[0]) * 10**6) if "MB" in name else text, encoding="utf-8")
            parse = subprocess.run([sys.executable, "-c", COMPILE, str(source)], capture_output=True, text=True)
            print(f"{name:<24} {cold:>11} {batch:>11} {parse.stdout.strip() or '-':>24}", flush=True)


if __name__ == "__main__":
    main()
