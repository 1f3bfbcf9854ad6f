"""`grade batch` against grading one by one and against `nbgrader autograde`, side by side.

Makes 20 exercise3 submissions (correct ones and common mistakes), then times,
in one run on this machine:
  A. grade batch over the 20 files (its default --jobs: twice the cores available);
  B. grade --submission on each file, one after the other;
  C. nbgrader autograde of the same 20 answers as notebooks of the course;
and prints B/A and C/A (targets: at least 5), plus the per-submission cost of A
against its floor: the time the checks' own phases take inside one child.

Then grades --memory-count submissions (default 100) in this process with the
batch API and reports the grading process's resident memory after the first
ten and after the last: it should stay flat.

    python benchmarks/batch_speed.py [--count 20] [--skip-nbgrader] [--memory-count 100]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader import exercises  # noqa: E402
from grader.exercises.reads import policy as grading_reads  # noqa: E402

SOLUTION = exercises.get("exercise3").solution.read_text(encoding="utf-8")
ANSWERS = [
    SOLUTION,
    SOLUTION.replace("self.layernorm_2 = layers.LayerNormalization()", "self.layernorm_2 = self.layernorm_1"),
    SOLUTION.replace("self.attention(inputs, inputs, attention_mask=mask)", "self.attention(inputs, inputs)"),
    SOLUTION.replace("self.layernorm_1(inputs + attention_output)", "self.layernorm_1(attention_output)"),
]
TARGET = 5.0


def timed(command: list[str], cwd: Path, env: dict) -> float:
    started = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if result.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-2000:]}")
    return time.perf_counter() - started


def floor_seconds() -> float:
    """The phases' own time inside one child (TensorFlow's import excluded)."""
    from grader.protocol import job as inputs, wire
    from grader.sandbox.process import Child

    exercise = exercises.get("exercise3")
    job = inputs.child_job(exercise, 4096, reads=grading_reads())

    def respond(record):  # the secret part of the job, as the grader sends it
        if record.get("event") == "end" and record.get("phase") == "variables" and record.get("ok"):
            return wire.dumps(inputs.secret_job(exercise, 0, record["data"]))
        return None

    run = Child(job, SOLUTION, 120, 4096, respond).wait()
    if "gradients" not in run.phases:
        raise SystemExit(f"the solution did not run every phase: {sorted(run.phases)}\n{run.stderr[-2000:]}")
    return sum(record["seconds"] for name, record in run.phases.items() if name != "runtime")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=20, help="number of submissions (default 20)")
    parser.add_argument("--skip-nbgrader", action="store_true", help="leave out the nbgrader autograde run")
    parser.add_argument("--memory-count", type=int, default=100, help="submissions for the memory run (0: skip)")
    args = parser.parse_args()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    grade = [sys.executable, "-m", "grader"]
    from grader.integrations.batch import default_jobs

    jobs = default_jobs()  # what grade batch uses when --jobs is not given
    work = Path(tempfile.mkdtemp(prefix="batch-bench-"))
    try:
        files = work / "files"
        files.mkdir()
        for index in range(args.count):
            (files / f"student{index:02d}.py").write_text(ANSWERS[index % len(ANSWERS)], encoding="utf-8")

        batch = timed(grade + ["batch", str(files), "--exercise", "exercise3", "--out", str(work / "out"),
                               "--jobs", str(jobs)], work, env)
        print(f"A. grade batch, {args.count} submissions, {jobs} jobs: {batch:.1f} s", flush=True)
        single = sum(timed(grade + ["exercise3", "--submission", str(path), "--json"], work, env)
                     for path in sorted(files.iterdir()))
        print(f"B. grade --submission one by one:             {single:.1f} s", flush=True)
        autograde = None
        if not args.skip_nbgrader:
            import nbformat

            from grader.integrations.course import write_course

            course = work / "course"
            write_course(course)
            subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", "exercise3"], cwd=course,
                           env=env, capture_output=True, check=True)
            release = nbformat.read(course / "release" / "exercise3" / "exercise3.ipynb", as_version=4)
            for index in range(args.count):
                notebook = nbformat.from_dict(release)
                for cell in notebook.cells:
                    if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
                        cell.source = ANSWERS[index % len(ANSWERS)]
                target = course / "submitted" / f"student{index:02d}" / "exercise3" / "exercise3.ipynb"
                target.parent.mkdir(parents=True)
                nbformat.write(notebook, target)
            autograde = timed([sys.executable, "-m", "nbgrader", "autograde", "exercise3", "--create"], course, env)
            print(f"C. nbgrader autograde of the notebooks:        {autograde:.1f} s", flush=True)

        floor = floor_seconds()
        print(f"\nspeed-up over one by one: {single / batch:.1f}x (target at least {TARGET:g}x) — "
              f"{'met' if single / batch >= TARGET else 'NOT met'}")
        if autograde is not None:
            print(f"speed-up over nbgrader autograde: {autograde / batch:.1f}x (target at least {TARGET:g}x) — "
                  f"{'met' if autograde / batch >= TARGET else 'NOT met'}")
        per_submission = batch * len(os.sched_getaffinity(0)) / args.count
        print(f"per-submission cost in batch: {per_submission:.2f} core-seconds; floor (the checks' own phases "
              f"in one child): {floor:.2f} s; overhead {per_submission - floor:.2f} s")
        if args.memory_count:
            memory_run(work, args.memory_count, jobs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def resident_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def memory_run(work: Path, count: int, jobs: int) -> None:
    from grader.integrations.batch import Submission, run_batch

    folder = work / "memory"
    folder.mkdir()
    submissions = []
    for index in range(count):
        path = folder / f"student{index:03d}.py"
        path.write_text(ANSWERS[index % len(ANSWERS)], encoding="utf-8")
        submissions.append(Submission(path.stem, path))
    samples: list[float] = []
    started = time.perf_counter()
    run_batch("exercise3", submissions, work / "memory-out", jobs=jobs,
              on_result=lambda result: samples.append(resident_mib()))
    print(f"\nmemory of the grading process over {count} submissions ({time.perf_counter() - started:.0f} s): "
          f"{samples[min(9, len(samples) - 1)]:.0f} MiB after 10, {samples[-1]:.0f} MiB after {count} "
          f"(growth {samples[-1] - samples[min(9, len(samples) - 1)]:+.0f} MiB)")


if __name__ == "__main__":
    sys.exit(main())
