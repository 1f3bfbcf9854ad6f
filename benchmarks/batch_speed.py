"""`grade batch` against grading one by one and against `nbgrader autograde`, side by side.

Makes 20 exercise3 answers (correct ones and common mistakes), as .py files and as notebooks of the
course (the released notebook, its answer cell filled, in nbgrader's submitted/ layout), then
times, in one run on this machine:
  A. grade batch over the .py files (its default --jobs: twice the cores available);
  D. grade batch over the course's notebooks;
  D1. grade batch over the first notebook alone (the batch's start and one grading);
  B. grade --submission on each .py file, one after the other, each a cold process (--no-server:
     TensorFlow imported for every file);
  W. the same through the warm grading server, as a student's `grade` runs by default (for
     information: one by one at the server's speed);
  C. nbgrader autograde of the same notebooks;
and prints B/A (target at least 5), W/A, D/A (a notebook within 1.2x its .py) and C/D (target at
least 20: the same notebooks) and what each notebook after the first adds against nbgrader's time per
notebook, then one warm grading broken down into its parts (the parent's
start of it, the process's start and confinement, loading the submission, each probe phase, the
judge, the results files), for a .py and for a notebook: the mean of a few gradings, each in its
own forked child, after one that warms the worker; and what the worker's import of Keras and
TensorFlow takes, with the modules that take longest of their own.

Then grades --memory-count submissions (default 100) in this process with the batch API and reports
the grading process's resident memory after the first ten and after the last: it should stay flat.

    python benchmarks/batch_speed.py [--count 20] [--skip-nbgrader] [--skip-one-by-one] [--memory-count 100]
                                     [--breakdown 5]

--skip-nbgrader leaves out C and D (no nbgrader needed); the breakdown's notebook is then the
course's source notebook.
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
TARGET = 5.0  # over grading one by one
NBGRADER_TARGET = 20.0  # over nbgrader autograde, on the same notebooks
NOTEBOOK_TARGET = 1.2  # a notebook against its .py, in a batch


def timed(command: list[str], cwd: Path, env: dict) -> float:
    started = time.perf_counter()
    result = subprocess.run(command, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if result.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-2000:]}")
    return time.perf_counter() - started


def one_by_one(grade: list[str], paths: list[Path], work: Path, env: dict, options: tuple[str, ...] = ()) -> float:
    """Seconds of ``grade exercise3 --submission PATH --json`` (and ``options``) on each path in turn."""
    return sum(timed(grade + ["exercise3", "--submission", str(path), "--json", *options], work, env)
               for path in paths)


def one_by_one_served(grade: list[str], paths: list[Path], work: Path, env: dict) -> float:
    """``one_by_one`` through a warm grading server of this run's own (its runtime folder in
    ``work``, so no server of the user's is used or left behind), the server's start included, as a
    student's first ``grade`` of a session pays it."""
    env = dict(env, XDG_RUNTIME_DIR=str(work / "runtime"))
    env.pop("GRADE_SERVER", None)
    (work / "runtime").mkdir(mode=0o700, exist_ok=True)
    try:
        return one_by_one(grade, paths, work, env)
    finally:
        subprocess.run(grade + ["server", "stop"], cwd=work, env=env, capture_output=True)


def worker_imports(env: dict, top: int = 6) -> None:
    """Print what the worker's import of Keras and TensorFlow (``runtime.preload``) takes, and the
    modules that take longest of their own (timed apart, by Python's ``-X importtime``, which slows
    the import down): a dependency whose import became slow shows here (ml_dtypes 0.7.0 took half a
    second)."""
    code = ("import time; started = time.perf_counter(); from grader.probe import runtime; "
            "runtime.preload('tensorflow'); print(time.perf_counter() - started)")
    seconds = float(subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                                   check=True).stdout.split()[-1])
    shown = subprocess.run([sys.executable, "-X", "importtime", "-c", code], cwd=ROOT, env=env,
                           capture_output=True, text=True, check=True)
    own = []
    for line in shown.stderr.splitlines():
        parts = line.removeprefix("import time:").split("|")
        if line.startswith("import time:") and len(parts) == 3 and parts[0].strip().isdigit():
            own.append((int(parts[0]) / 1e6, parts[2].strip()))
    heaviest = ", ".join(f"{name} {took:.2f} s" for took, name in sorted(own, reverse=True)[:top])
    print(f"\nthe worker's import of Keras and TensorFlow: {seconds:.2f} s; longest of their own: {heaviest}")


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
    parser.add_argument("--skip-nbgrader", action="store_true", help="leave out the runs that need nbgrader")
    parser.add_argument("--skip-one-by-one", action="store_true",
                        help="leave out B and W (grading one by one): for a large --count")
    parser.add_argument("--memory-count", type=int, default=100, help="submissions for the memory run (0: skip)")
    parser.add_argument("--breakdown", type=int, default=5, metavar="N",
                        help="warm gradings averaged in the breakdown (0: skip)")
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
        course = work / "course"
        notebook = None if args.skip_nbgrader else make_course(course, args.count, env)

        batch = timed(grade + ["batch", str(files), "--exercise", "exercise3", "--out", str(work / "out"),
                               "--jobs", str(jobs)], work, env)
        print(f"A. grade batch, {args.count} .py files, {jobs} jobs:  {batch:.1f} s", flush=True)
        notebooks = None
        if notebook is not None:
            notebooks = timed(grade + ["batch", str(course), "--exercise", "exercise3", "--out",
                                       str(work / "out-notebooks"), "--jobs", str(jobs)], work, env)
            print(f"D. grade batch, the same answers as notebooks:  {notebooks:.1f} s", flush=True)
            alone = timed(grade + ["batch", str(course / "submitted" / "student00"), "--exercise", "exercise3",
                                   "--out", str(work / "out-one"), "--jobs", str(jobs)], work, env)
            print(f"D1. grade batch, the first notebook alone:      {alone:.1f} s", flush=True)
        paths = sorted(files.iterdir())
        single = served = None
        if not args.skip_one_by_one:
            single = one_by_one(grade, paths, work, env, ("--no-server",))
            print(f"B. grade --submission one by one, cold:         {single:.1f} s", flush=True)
            served = one_by_one_served(grade, paths, work, env)
            print(f"W. the same through the warm grading server:    {served:.1f} s", flush=True)
        autograde = None
        if notebook is not None:
            autograde = timed([sys.executable, "-m", "nbgrader", "autograde", "exercise3", "--create"], course, env)
            print(f"C. nbgrader autograde of the notebooks:          {autograde:.1f} s", flush=True)

        floor = floor_seconds()
        if single is not None:
            print(f"\nspeed-up over one by one (B/A): {single / batch:.1f}x (target at least {TARGET:g}x) — "
                  f"{'met' if single / batch >= TARGET else 'NOT met'}")
        if notebooks is not None and autograde is not None:
            print(f"a notebook against its .py in a batch (D/A): {notebooks / batch:.2f}x (target at most "
                  f"{NOTEBOOK_TARGET:g}x) — {'met' if notebooks / batch <= NOTEBOOK_TARGET else 'NOT met'}")
            print(f"speed-up over nbgrader autograde on the same notebooks (C/D): {autograde / notebooks:.1f}x "
                  f"(target at least {NBGRADER_TARGET:g}x) — "
                  f"{'met' if autograde / notebooks >= NBGRADER_TARGET else 'NOT met'}")
            if args.count > 1:  # what the batch's start costs once, and what each further notebook adds
                added = (notebooks - alone) / (args.count - 1)
                print(f"each notebook after the first adds {added:.2f} s to the batch against {autograde / args.count:.2f} s "
                      f"under nbgrader ({autograde / args.count / added:.1f}x); the batch's start and its first "
                      f"notebook take {alone:.1f} s")
        per_submission = batch * len(os.sched_getaffinity(0)) / args.count
        print(f"per-submission cost in batch: {per_submission:.2f} core-seconds; floor (the checks' own phases "
              f"in one child): {floor:.2f} s; overhead {per_submission - floor:.2f} s")
        if args.breakdown:
            if notebook is None:
                from grader.integrations.course import write_course

                write_course(course, ["exercise3"])
                notebook = course / "source" / "exercise3" / "exercise3.ipynb"
            source = work / "breakdown.py"
            source.write_text(SOLUTION, encoding="utf-8")
            show_breakdown({".py file": breakdown(source, args.breakdown, work),
                            "notebook": breakdown(notebook, args.breakdown, work)})
        worker_imports(env)
        if args.memory_count:
            memory_run(work, args.memory_count, jobs)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def make_course(course: Path, count: int, env: dict) -> Path:
    """The course with exercise3 released and ``count`` students' notebooks in submitted/ (the
    released notebook, its answer cell filled); the released notebook's path."""
    import nbformat

    from grader.integrations.course import write_course

    write_course(course)
    subprocess.run([sys.executable, "-m", "nbgrader", "generate_assignment", "exercise3"], cwd=course,
                   env=env, capture_output=True, check=True)
    released = course / "release" / "exercise3" / "exercise3.ipynb"
    release = nbformat.read(released, as_version=4)
    for index in range(count):
        notebook = nbformat.from_dict(release)
        for cell in notebook.cells:
            if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
                cell.source = ANSWERS[index % len(ANSWERS)]
        target = course / "submitted" / f"student{index:02d}" / "exercise3" / "exercise3.ipynb"
        target.parent.mkdir(parents=True)
        nbformat.write(notebook, target)
    return course / "submitted" / "student00" / "exercise3" / "exercise3.ipynb"


def breakdown(path: Path, count: int, work: Path) -> dict[str, float]:
    """Mean seconds of each part of a warm grading of ``path`` (``count`` gradings, after one that
    warms the worker and the judge server), each part as the grader sees it."""
    from grader.api import Grading
    from grader.integrations.outputs import Outputs, Result
    from grader.integrations.discovery import Submission
    from grader.workers import Workers
    from grader.integrations.class_report import write_report

    workers = Workers()
    parts: dict[str, float] = {}

    def add(name: str, seconds: float) -> None:
        parts[name] = parts.get(name, 0.0) + seconds

    try:
        for index in range(count + 1):
            started = time.perf_counter()
            grading = Grading("exercise3", path, runner=workers)
            forked = time.perf_counter()
            run = grading.child.wait()
            ended = time.perf_counter()
            verdict = grading.finish()  # starts the judge and waits for it
            judged = time.perf_counter()
            out = work / f"breakdown-out-{path.suffix[1:]}-{index}"
            with Outputs(out) as outputs:
                outputs.write(Result(Submission("student", path), verdict, judged - started))
            written = time.perf_counter()
            write_report(out)
            reported = time.perf_counter()
            if verdict.status != "passed":
                raise SystemExit(f"the solution as {path.name} did not pass: {verdict.status}")
            if index == 0:
                continue  # the worker's and the judge server's first grading
            phases = {name: record.get("seconds", 0.0) for name, record in run.phases.items()}
            add("parent: read, job, fork request", forked - started)
            # the child's clock, from the fork to its end, less its phases: start, namespaces, the stream's end
            add("process start and end (fork, namespaces)", max(0.0, run.seconds - sum(phases.values())))
            add("runtime and confinement", phases.pop("runtime", 0.0))
            add("loading the submission", phases.pop("load", 0.0))
            for name, seconds in phases.items():
                add(f"phase {name}", seconds)
            add("judge", judged - ended)
            add("results files", written - judged)
            add("class report (once per run)", reported - written)
    finally:
        workers.close()
    return {name: seconds / count for name, seconds in parts.items()}


def show_breakdown(columns: dict[str, dict[str, float]]) -> None:
    names = list(dict.fromkeys(name for parts in columns.values() for name in parts))
    width = max(len(name) for name in names)
    print(f"\none warm grading of the solution, mean seconds\n{'':{width}}  " +
          "  ".join(f"{title:>9}" for title in columns))
    for name in names:
        print(f"{name:{width}}  " + "  ".join(f"{parts.get(name, 0.0):9.3f}" for parts in columns.values()))
    totals = {title: sum(v for k, v in parts.items() if not k.startswith("class report"))
              for title, parts in columns.items()}
    print(f"{'per grading (without the report)':{width}}  " + "  ".join(f"{t:9.3f}" for t in totals.values()))


def resident_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def memory_run(work: Path, count: int, jobs: int) -> None:
    from grader.integrations.discovery import Submission
    from grader.integrations.batch import run_batch

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
