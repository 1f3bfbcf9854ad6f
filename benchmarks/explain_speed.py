"""Wall time of `grade explain exercise3` against `python -c "import tensorflow"`, and its determinism.

Both commands run alternately in one session, several rounds, on the same
machine; the ratio of the medians is the number to read (target: at most 15).
Every round explains the same submission with the same seed, so every JSON
output must be identical; the script says whether they were.

    python benchmarks/explain_speed.py [--rounds 3] [--submission PATH] [--seed N]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = 15.0


def timed(command: list[str], env: dict) -> tuple[float, str]:
    started = time.perf_counter()
    result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=ROOT, text=True)
    elapsed = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} exited with {result.returncode}")
    return elapsed, result.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds of both commands (default 3)")
    parser.add_argument("--submission", type=Path, default=ROOT / "solutions" / "exercise3.py",
                        help="the encoder to explain (default: the solution, so the student's path is timed)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the experiments (default 0)")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    grade = shutil.which("grade") or sys.executable
    explain_cmd = [grade] if grade != sys.executable else [sys.executable, "-m", "grader"]
    explain_cmd += ["explain", "exercise3", "--submission", str(args.submission.resolve()), "--seed", str(args.seed),
                    "--json"]
    import_cmd = [sys.executable, "-c", "import tensorflow"]

    timed(import_cmd, env)  # warm the file cache
    imports, explains, outputs = [], [], []
    for round_number in range(1, args.rounds + 1):
        imports.append(timed(import_cmd, env)[0])
        seconds, output = timed(explain_cmd, env)
        explains.append(seconds)
        outputs.append(output)
        print(f"round {round_number}: import tensorflow {imports[-1]:.2f} s, grade explain exercise3 "
              f"{explains[-1]:.2f} s", flush=True)
    base, ours = statistics.median(imports), statistics.median(explains)
    ratio = ours / base
    document = json.loads(outputs[0])
    print(f"\nsubject: {document['subject']}")
    for claim in document["claims"]:
        print(f"  {claim['id']}: {claim['verdict']}")
    print(f"\nmedian import tensorflow:      {base:.2f} s")
    print(f"median grade explain exercise3: {ours:.2f} s")
    print(f"ratio: {ratio:.2f} (target at most {TARGET:g}) — {'met' if ratio <= TARGET else 'NOT met'}")
    if len(outputs) > 1:
        same = all(output == outputs[0] for output in outputs)
        print(f"deterministic: {'yes' if same else 'NO'} — {len(outputs)} runs with seed {args.seed} gave "
              f"{'identical' if same else 'different'} JSON")
    return 0


if __name__ == "__main__":
    sys.exit(main())
