"""Grade every catalogued submission with two installations and require the same verdicts.

    .venv/bin/python .ci/compare_pythons.py OTHER_GRADE [--against VERDICTS]

Writes each exercise's solution, stub, mistakes and variants (tests/catalog) to a folder outside
the clone, grades them with `grade batch --seed N` of OTHER_GRADE (another Python's installation)
and compares status, score and every check's status with this environment's verdicts: those the
test suite's catalogue wrote (``--against``: the file ``GRADE_CATALOG_VERDICTS`` named when the suite
ran, with its seed), or else a `grade batch --seed 0` of this environment. Ends with the line
"N passed, N failed" (one per submission) and exits 1 on any difference, or if a solution fails.
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader import exercises  # noqa: E402
from tests.catalog import catalog  # noqa: E402

AT_ONCE = 2  # exercises graded at once, each by its own `grade batch`


def submissions(exercise) -> dict[str, str]:
    mistakes, variants = catalog(exercise.id)
    sources = {"solution": exercise.solution.read_text(encoding="utf-8"),
               "stub": exercise.stub.read_text(encoding="utf-8")}
    sources.update({f"mistake_{m.name}": m.source for m in mistakes})
    sources.update({f"variant_{v.name}": v.source for v in variants})
    return sources


def batch(grade: str, folder: Path, exercise_id: str, out: Path, cwd: Path, seed: int) -> dict[str, dict]:
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", COLUMNS="120",
               GRADE_STATE_DIR=str(out.with_name(out.name + ".state")))  # each batch's own, as two run at once
    result = subprocess.run([grade, "batch", str(folder), "--exercise", exercise_id, "--out", str(out),
                             "--seed", str(seed)], capture_output=True, text=True, cwd=cwd, env=env, timeout=3600)
    if result.returncode != 0:
        raise SystemExit(f"{grade} batch failed ({result.returncode}):\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    verdicts = [json.loads(line) for line in (out / "verdicts.jsonl").read_text().splitlines()]
    return {Path(v["submission"]).stem: v for v in verdicts}


def summary(verdict: dict) -> tuple:
    return verdict["status"], verdict["score"], tuple((c["id"], c["status"]) for c in verdict["checks"])


def main() -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("other", help="the other installation's grade command")
    parser.add_argument("--against", type=Path, help="this environment's verdicts, as the test suite wrote them")
    args = parser.parse_args()
    here = str(Path(sys.executable).parent / "grade")
    versions = [subprocess.run([str(Path(grade).with_name("python")), "--version"], capture_output=True,
                               text=True).stdout.strip() for grade in (here, args.other)]
    kept = json.loads(args.against.read_text(encoding="utf-8")) if args.against else None
    seed = kept["seed"] if kept else 0
    print(f"comparing {here} ({versions[0]}{', from the test suite' if kept else ''}) with {args.other} "
          f"({versions[1]}), seed {seed}")
    passed = failed = 0
    with tempfile.TemporaryDirectory() as scratch:
        scratch = Path(scratch)
        for exercise in exercises.EXERCISES.values():
            folder = scratch / exercise.id
            folder.mkdir()
            for name, source in submissions(exercise).items():
                (folder / f"{name}.py").write_text(source, encoding="utf-8")

        def both(exercise) -> tuple[dict, dict]:
            if kept:
                mine = {name: verdict for (graded, name), verdict in
                        ((tuple(key.split("/", 1)), v) for key, v in kept["verdicts"].items()) if graded == exercise.id}
            else:
                mine = {name: summary(v) for name, v in batch(
                    here, scratch / exercise.id, exercise.id, scratch / f"{exercise.id}-a", scratch, seed).items()}
            return mine, batch(args.other, scratch / exercise.id, exercise.id, scratch / f"{exercise.id}-b",
                               scratch, seed)

        # Two exercises' batches at a time: one's worker imports TensorFlow, and its last gradings
        # leave cores idle, while the other grades. Results are compared in the exercises' order; a
        # batch that fails ends the run without starting the batches still waiting.
        pool = concurrent.futures.ThreadPoolExecutor(max_workers=AT_ONCE)
        graded = [(exercise, pool.submit(both, exercise)) for exercise in exercises.EXERCISES.values()]
        try:
            for exercise, future in graded:
                mine, theirs = future.result()
                for name in sorted(set(mine) | set(submissions(exercise))):
                    ours = tuple(mine[name]) if name in mine else None
                    other = summary(theirs[name]) if name in theirs else None
                    same = ours is not None and other is not None and _comparable(ours) == _comparable(other)
                    solved = name != "solution" or (ours is not None and ours[0] == "passed")
                    if same and solved:
                        passed += 1
                        continue
                    failed += 1
                    print(f"DIFFERENT {exercise.id}/{name}:\n  {ours if ours is not None else 'not graded'}\n  "
                          f"{other if other is not None else 'not graded'}")
                print(f"{exercise.id}: {len(mine)} submissions compared", flush=True)
        finally:
            pool.shutdown(cancel_futures=True)
    print(f"{passed} passed, {failed} failed")
    return 1 if failed or not passed else 0


def _comparable(outcome) -> tuple:
    status, score, checks = outcome
    return status, float(score), tuple(tuple(check) for check in checks)


if __name__ == "__main__":
    sys.exit(main())
