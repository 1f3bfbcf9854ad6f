"""A class of hundreds graded through the Slurm scripts, on a private single-node Slurm.

Makes a class of --count exercise3 submissions (default 600) in nbgrader's layout: the catalogue's
files (tests/catalog: the solution, the stub, every catalogued mistake and correct variant)
repeated under distinct student ids. Submits it with grader/integrations/slurm/submit-class.sh, in
--shares shares of --cpus-per-task CPUs each (default 2 of 1: both tasks at once on a two-core
machine), to the private Slurm of tests/slurm_cluster.py, the one the suite starts. Reports:

- submissions per minute per core: the class over the CPU-minutes its tasks held (each task's
  run time in Slurm, StartTime to EndTime, times its CPUs), and over the wall time;
- each task's peak memory: the memory of its whole process tree (grade batch, its TensorFlow
  worker, the forked gradings, the judges) sampled every second from /proc, as proportional set
  size (pages shared between the worker and its forks counted once) and as the sum of resident sizes;
- the merge: the merge job's time in Slurm, and `grade merge` of the same shards timed here;
- what a class of 5,000 costs in node-hours at that rate;
- whether every merged verdict is the one the catalogue expects (solution and variants pass, the
  stub and every mistake fail).

    python benchmarks/slurm_class.py [--count 600] [--shares 2] [--cpus-per-task 1] [--keep DIR]

It takes several minutes of every core: run it on a machine nobody else is timing on.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from grader import exercises  # noqa: E402
from tests.catalog.exercise3 import MISTAKES, VARIANTS  # noqa: E402
from tests.slurm_cluster import Unavailable, private_slurm  # noqa: E402

SLURM = ROOT / "grader" / "integrations" / "slurm"
LARGE_CLASS = 5000


def catalogue() -> list[tuple[str, str, str]]:
    """(name, source, the status it must get) of every catalogued exercise3 file."""
    exercise = exercises.get("exercise3")
    files = [("solution", exercise.solution.read_text(encoding="utf-8"), "passed"),
             ("stub", exercise.stub.read_text(encoding="utf-8"), "failed")]
    files += [(f"variant-{v.name}", v.source, "passed") for v in VARIANTS]
    files += [(f"mistake-{m.name}", m.source, "failed") for m in MISTAKES]
    return files


def make_class(root: Path, count: int) -> dict[str, str]:
    """nbgrader's submitted/<student>/exercise3/exercise3.py for ``count`` students; {id: expected status}."""
    files = catalogue()
    expected = {}
    for number in range(count):
        name, source, status = files[number % len(files)]
        student = f"s{number:05d}-{name}"
        folder = root / "submitted" / student / "exercise3"
        folder.mkdir(parents=True)
        (folder / "exercise3.py").write_text(source, encoding="utf-8")
        expected[student] = status
    return expected


def _stat(pid: int) -> tuple[int, str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state_and_rest = text.rsplit(")", 1)[1].split()
    return int(state_and_rest[1]), state_and_rest[0]


def _memory(pid: int) -> tuple[int, int]:
    """(Pss, Rss) of a process, in KiB; zeros once it is gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0, 0
    found = dict(re.findall(r"^(Pss|Rss):\s+(\d+) kB", text, re.MULTILINE))
    return int(found.get("Pss", 0)), int(found.get("Rss", 0))


class Sampler(threading.Thread):
    """Every second, the memory of each task's process tree: the ``grade batch --shard K/N``
    process and everything under it."""

    def __init__(self):
        super().__init__(daemon=True)
        self.peaks: dict[str, dict[str, int]] = {}
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.wait(1.0):
            parents, roots = {}, {}
            for entry in os.listdir("/proc"):
                if not entry.isdigit():
                    continue
                pid = int(entry)
                stat = _stat(pid)
                if stat is None:
                    continue
                parents[pid] = stat[0]
                try:
                    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
                except OSError:
                    continue
                if b"batch" in argv and b"--shard" in argv and any(a.endswith(b"grade") for a in argv[:2]):
                    roots[pid] = argv[argv.index(b"--shard") + 1].decode()
            children: dict[int, list[int]] = {}
            for pid, parent in parents.items():
                children.setdefault(parent, []).append(pid)
            for root, shard in roots.items():
                tree, frontier = [root], [root]
                while frontier:
                    frontier = [child for pid in frontier for child in children.get(pid, [])]
                    tree += frontier
                memories = [_memory(pid) for pid in tree]
                peak = self.peaks.setdefault(shard, {"pss": 0, "rss": 0, "largest": 0, "processes": 0})
                peak["pss"] = max(peak["pss"], sum(pss for pss, _ in memories))
                peak["rss"] = max(peak["rss"], sum(rss for _, rss in memories))
                peak["largest"] = max(peak["largest"], max(rss for _, rss in memories))
                peak["processes"] = max(peak["processes"], len(tree))


def _when(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=600, help="submissions in the class (at least 500)")
    parser.add_argument("--shares", type=int, default=2)
    parser.add_argument("--cpus-per-task", type=int, default=1)
    parser.add_argument("--keep", type=Path, help="leave the class and its results in this (new) folder")
    args = parser.parse_args()
    if args.count < 500:
        parser.error("--count: a class of at least 500, to measure a class rather than its start-up")
    grade = Path(sys.executable).parent / "grade"
    if not grade.is_file():
        parser.error(f"run it with the Python of the project's virtual environment (no {grade})")

    work = args.keep or Path(tempfile.mkdtemp(prefix="slurm-class-"))
    work.mkdir(parents=True, exist_ok=True)
    course, out = work / "course", work / "results"
    expected = make_class(course, args.count)
    print(f"A class of {args.count} exercise3 submissions ({len(catalogue())} catalogued files, repeated) in "
          f"{args.shares} shares of {args.cpus_per_task} CPU(s); load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores.", flush=True)
    try:
        with private_slurm() as slurm:
            sampler = Sampler()
            sampler.start()
            submitted = subprocess.run(
                ["bash", str(SLURM / "submit-class.sh"), "--grade", str(grade), "--class", str(course),
                 "--exercise", "exercise3", "--seed", "2026", "--shares", str(args.shares), "--out", str(out),
                 "--parsable", "--", "--time=03:00:00", f"--cpus-per-task={args.cpus_per_task}", "--mem=4G"],
                env=dict(slurm.env, TF_CPP_MIN_LOG_LEVEL="3"), capture_output=True, text=True, timeout=120)
            if submitted.returncode != 0:
                raise SystemExit(submitted.stderr)
            array, merge = submitted.stdout.split()
            limit = args.shares * slurm.time_limit(array) + slurm.time_limit(merge)
            ended = slurm.wait([array, merge], limit, poll=5)
            sampler.stopping.set()
            sampler.join()
            load = os.getloadavg()[0]
    except Unavailable as why:
        raise SystemExit(f"no private Slurm here: {why}") from None

    tasks = ended[array]
    failed = [(r["JobId"], r["JobState"], r["ExitCode"]) for rs in ended.values() for r in rs
              if (r["JobState"], r["ExitCode"]) != ("COMPLETED", "0:0")]
    if failed:
        raise SystemExit(f"jobs that did not complete: {failed}; their output is in {out / 'logs'}")
    starts = [_when(r["StartTime"]) for r in tasks]
    ends = [_when(r["EndTime"]) for r in tasks]
    cpu_minutes = sum((end - start) * args.cpus_per_task for start, end in zip(starts, ends)) / 60
    wall_minutes = (max(ends) - min(starts)) / 60
    per_core = args.count / cpu_minutes
    (merge_record,) = ended[merge]
    merge_in_slurm = _when(merge_record["EndTime"]) - _when(merge_record["StartTime"])
    again = work / "merged-again"
    started = time.perf_counter()
    subprocess.run([str(grade), "merge", "--out", str(again), "--force", "--",
                    *(str(out / f"shard-{k}") for k in range(1, args.shares + 1))],
                   check=True, stdout=subprocess.DEVNULL, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    merge_here = time.perf_counter() - started

    verdicts = [json.loads(line) for line in (out / "class" / "verdicts.jsonl").read_text().splitlines()]
    wrong = sorted(v["id"] for v in verdicts if v["status"] != expected.get(v["id"]))
    seconds = [float(row.split(",")[4]) for row in (out / "class" / "summary.csv").read_text().splitlines()[1:]]

    print(f"\nGraded {len(verdicts)} submissions in {args.shares} Slurm tasks, {wall_minutes:.1f} minutes from the "
          f"first task's start to the last one's end (load average {load:.1f} at the end).")
    print(f"  submissions per minute per core: {per_core:.1f} (over {cpu_minutes:.1f} CPU-minutes held); "
          f"{args.count / wall_minutes:.1f} per minute of wall time on the node")
    print(f"  one grading, in its task: median {sorted(seconds)[len(seconds) // 2]:.1f} s, "
          f"longest {max(seconds):.1f} s (--jobs {2 * args.cpus_per_task} at once per task)")
    for record, start, end in zip(tasks, starts, ends):
        task = f"{array}_{record.get('ArrayTaskId')}"
        shard = f"{record.get('ArrayTaskId')}/{args.shares}"
        peak = sampler.peaks.get(shard, {})
        print(f"  task {task} (shard {shard}): {end - start:.0f} s; peak memory of its processes "
              f"{peak.get('pss', 0) / 1024:.0f} MiB proportional ({peak.get('rss', 0) / 1024:.0f} MiB resident "
              f"summed, largest process {peak.get('largest', 0) / 1024:.0f} MiB, up to {peak.get('processes', 0)} "
              f"processes)")
    print(f"  the merge: {merge_in_slurm:.0f} s as a Slurm job (whole seconds), {merge_here:.1f} s for grade merge "
          f"of the same shards run here")
    core_hours = LARGE_CLASS / per_core / 60
    print(f"  a class of {LARGE_CLASS:,} at this rate: {core_hours:.1f} core-hours, so {core_hours / 2:.1f} "
          f"node-hours on 2-core nodes, {core_hours / 16:.2f} on 16-core ones")
    print(f"  verdicts as the catalogue expects: {len(verdicts) - len(wrong)} of {len(verdicts)}"
          + (f" (not: {', '.join(wrong[:5])})" if wrong else ""))
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if wrong or len(verdicts) != args.count else 0


if __name__ == "__main__":
    sys.exit(main())
