"""A hostile class against `grade batch` and `grade`: no escape, no crash, nothing left behind.

Beside a correct submission and the stub, one submission per attack (tests/hostile.py)
looks for and uses any helper, kills or stalls what forked it, sends malformed,
deep or cyclic evidence, dies by a real-time signal, leaves a daemon holding files,
messages listeners this test runs, reads its parent's /proc and root-only files,
writes outside its scratch folder, and takes all the processes and bytes it can.
The batch must give one verdict per file, pass the correct one, and leave the
listeners silent, every file outside scratch unchanged, and no process and no
scratch folder behind. Where a protection depends on the kernel, the test checks
what the verdict's header claims; on this machine it claims everything.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from grader import exercises
from grader.workers import Workers
from grader.integrations.batch import run_batch
from grader.integrations.discovery import survey
from grader.sandbox.privileges import UID_BASE, UID_SPAN
from grader.api import Settings
from grader.protocol import limits

from .hostile import DAEMON_MARK, SOLUTION, STUB, Targets, sources

ROOT = exercises.PROJECT_ROOT
SETTINGS = Settings(timeout=120, checks_timeout=60)
PROTECTED = [ROOT / "solutions", ROOT / "exercises", ROOT / "grader"]


def _digests(folders) -> dict[str, str]:
    found = {}
    for folder in folders:
        for path in sorted(Path(folder).rglob("*")):
            if path.is_file() and not path.is_symlink() and "__pycache__" not in path.parts and path.suffix != ".sock":
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
    return found


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/<pid>/stat after the command's name (state first), None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return fields if len(fields) > 19 else None


def _start_time(pid: int) -> str | None:
    """When process ``pid`` started (None once it has ended: gone, or a zombie waiting to be reaped)."""
    fields = _stat(pid)
    return None if fields is None or fields[0] in ("Z", "X") else fields[19]


def _parent(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[1]) if fields is not None else None


def _under_another_test_process(pid: int, run: tuple[int, int] | None) -> bool:
    """Whether ``pid`` descends from another test process of this run: ``run`` is (the pid of
    pytest-xdist's controller, the pid of this test process), None outside pytest-xdist. The other
    test processes are this one's siblings under the controller, and their own gradings live beside
    this test's. What escapes a grading is reparented above every grading's reaper (to PID 1, or a
    subreaper outside the suite), never into another test process's tree, so leaving those trees
    out hides no escape of this test's gradings."""
    if run is None:
        return False
    controller, this = run
    seen = set()
    while pid > 1 and pid not in seen:
        seen.add(pid)
        parent = _parent(pid)
        if parent is None:
            return False
        if parent == controller:
            return pid != this
        pid = parent
    return False


def _this_run() -> tuple[int, int] | None:
    return (os.getppid(), os.getpid()) if os.environ.get("PYTEST_XDIST_WORKER") else None


def _leftover_processes(known: list[tuple[int, str]], scratch_root: Path, run=_this_run) -> list[str]:
    """Processes of the gradings still alive: a known keeper, a grading user's process of this
    interpreter, the daemon, or anything whose environment points into this test's scratch root;
    the gradings of the run's other test processes aside (``run()``: _under_another_test_process)."""
    left = [f"keeper {pid}" for pid, started in known if _start_time(pid) == started]
    beside = run()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        if _start_time(int(entry)) is None or _under_another_test_process(int(entry), beside):
            continue
        try:
            uid = os.stat(f"/proc/{entry}").st_uid
            cmdline = open(f"/proc/{entry}/cmdline", "rb").read()
            environ = open(f"/proc/{entry}/environ", "rb").read()
        except OSError:
            continue
        ours = cmdline.split(b"\0")[0] == os.fsencode(sys.executable)  # not another grader's on this machine
        if (UID_BASE <= uid < UID_BASE + UID_SPAN and ours) or DAEMON_MARK.encode() in cmdline \
                or str(scratch_root).encode() in environ:
            left.append(f"{entry}: {cmdline[:200]!r}")
    return left


class _PeakMemory:
    """The growth of this process's resident memory over a block, sampled every 20 ms."""

    def __enter__(self):
        import threading

        self.start = self.peak = _resident()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self):
        while not self._done.wait(0.02):
            self.peak = max(self.peak, _resident())

    def __exit__(self, *_):
        self._done.set()
        self._thread.join()
        self.peak = max(self.peak, _resident())
        self.growth = self.peak - self.start


def _resident() -> int:
    """Resident memory of this process, in bytes."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def _reports(verdict, topic: str) -> list[str]:
    prefix = f"REPORT {topic} "
    return [line[len(prefix):] for line in verdict.context.get("output", "").splitlines() if line.startswith(prefix)]


class _Recording(Workers):
    """The batch runner, noting each keeper it forks (pid and start time) to look for them afterwards."""

    def __init__(self):
        super().__init__()
        self.keepers: list[tuple[int, str]] = []
        self.worker_pids: set[int] = set()

    def __call__(self, *args, **kwargs):
        child = super().__call__(*args, **kwargs)
        self.keepers.append((child.pid, _start_time(child.pid)))
        self.worker_pids.add(self.pid)
        return child


@pytest.fixture(scope="module")
def hostile_class(tmp_path_factory):
    work = tmp_path_factory.mktemp("hostile")
    scratch_root = work / "scratch"
    scratch_root.mkdir()
    targets = Targets(work / "targets", secrets.token_hex(8))
    out = work / "out"
    targets.results = out / "verdicts.jsonl"
    files = dict(sources(targets), correct=SOLUTION, stub=STUB)
    folder = work / "class"
    folder.mkdir()
    for name, source in files.items():
        (folder / f"{name}.py").write_text(source, encoding="utf-8")
    secret = "GRADE_HOSTILE_SECRET"
    saved_tempdir, saved_secret = tempfile.tempdir, os.environ.get(secret)
    tempfile.tempdir = str(scratch_root)
    os.environ[secret] = targets.secret
    before = _digests([*PROTECTED, folder, targets.folder])
    workers = _Recording()
    alone = work / "alone"
    alone.mkdir()
    (alone / "correct.py").write_text(SOLUTION, encoding="utf-8")
    try:
        with _PeakMemory() as solution_alone:  # what the grader's own process needs for a correct class
            run_batch("exercise3", survey([alone], "exercise3").submissions, work / "out-alone", SETTINGS, jobs=2,
                      workers=workers)
        with _PeakMemory() as hostile_batch:
            results = run_batch("exercise3", survey([folder], "exercise3").submissions, out, SETTINGS, jobs=2, workers=workers)
    finally:
        workers.close()
        tempfile.tempdir = saved_tempdir
        if saved_secret is None:
            os.environ.pop(secret, None)
        else:
            os.environ[secret] = saved_secret
    after = _digests([*PROTECTED, folder, targets.folder])
    state = {
        "results": {r.submission.id: r for r in results},
        "names": set(files),
        "out": out,
        "targets": targets,
        "received": targets.received(),
        "changed": {k for k in set(before) | set(after) if before.get(k) != after.get(k)},
        "left": _leftover_processes(workers.keepers, scratch_root),
        "scratch_left": sorted(os.listdir(scratch_root)),
        "folder": folder,
        "work": work,
        "parent_growth": {"solution": solution_alone.growth, "hostile": hostile_batch.growth},
    }
    yield state
    targets.close()


def _claims(verdict) -> dict:
    return verdict.context.get("confinement") or {}


def test_one_verdict_per_file_and_the_correct_one_passes(hostile_class):
    results = hostile_class["results"]
    assert set(results) == hostile_class["names"]
    assert results["correct"].verdict.status == "passed"
    for name, result in results.items():
        if name != "correct":
            assert result.verdict.status in ("failed", "error"), (name, result.verdict.error)
            assert result.verdict.exit_code in (1, 2)
    rows = [json.loads(line) for line in (hostile_class["out"] / "verdicts.jsonl").read_text().splitlines()]
    assert len(rows) == len(results)
    by_path = {row["submission"]: row["status"] for row in rows}
    assert by_path == {str(r.submission.path): r.verdict.status for r in results.values()}


def test_nothing_left_behind_and_nothing_outside_changed(hostile_class):
    assert hostile_class["left"] == []
    assert hostile_class["scratch_left"] == []
    assert hostile_class["changed"] == set()
    assert not Path("/tmp/grade-hostile-planted").exists()
    assert hostile_class["targets"].victim.read_text() == "untouched"


def test_no_listener_received_anything(hostile_class):
    assert hostile_class["received"] == []
    sent = _reports(hostile_class["results"]["sends_udp_and_unix_messages"].verdict, "socket")
    assert len(sent) == 5 and not [line for line in sent if line.endswith(": sent")], sent


def test_the_header_claims_every_protection_this_kernel_offers(hostile_class):
    from grader.sandbox.landlock import abi_version

    verdict = hostile_class["results"]["correct"].verdict
    claims = _claims(verdict)
    assert claims, verdict.context.get("sandbox")
    if abi_version() < 6:
        pytest.skip(f"this kernel's Landlock ABI is {abi_version()}: no signal scoping")
    assert claims["landlock"]["applied"] and claims["landlock"]["signals"] and claims["landlock"]["network"]
    assert claims["seccomp"] is True
    if claims["refused"]:
        pytest.skip(f"this kernel refused: {claims['refused']}")
    assert all(claims["namespaces"][name] for name in ("pid", "mount", "network", "ipc"))
    assert claims["own_proc"] and claims["reaper"] == "pid-namespace"
    if os.geteuid() == 0:
        assert claims["from_root"] and UID_BASE <= claims["uid"] < UID_BASE + UID_SPAN
    assert claims["capabilities"] == 0 and claims["process_limit"] and claims["write_limit"]
    assert claims["cgroup"]["memory_bytes"] == SETTINGS.memory_mb * 1024 * 1024 and claims["nice"] > 0
    assert "a minimal environment" in verdict.context["sandbox"]


def test_no_helper_is_reachable(hostile_class):
    verdict = hostile_class["results"]["uses_any_helper"].verdict
    found = _reports(verdict, "helper")
    descriptors = [line for line in found if line.startswith("fd ")]
    assert [line.split()[1] for line in descriptors] == ["3", "4"]  # the evidence and control pipes only
    assert all(line.split()[2].startswith("pipe:") for line in descriptors)
    assert not [line for line in found if line.startswith(("connected", "sent on"))], found
    if _claims(verdict).get("namespaces", {}).get("network"):
        assert "0 unix sockets listed" in found


def test_the_forker_cannot_be_killed_or_stalled(hostile_class):
    verdict = hostile_class["results"]["kills_and_stalls_the_forker"].verdict
    done = _reports(verdict, "kill")
    assert not [line for line in done if line.startswith("sent")], done
    assert verdict.status == "error" and "not valid evidence" in verdict.error  # it wrote to its evidence pipe
    assert hostile_class["results"]["correct"].verdict.status == "passed"


@pytest.mark.parametrize("name, says", [
    ("error_of_the_wrong_type", "malformed"),
    ("error_frames_of_the_wrong_type", "malformed"),
    ("load_data_of_the_wrong_type", "malformed"),
    ("deeply_nested_evidence", "nested too deeply"),
    ("cyclic_trace", "could not be graded"),
    ("real_time_signal", "SIGRTMIN+5"),
])
def test_malformed_evidence_and_deaths_are_error_verdicts(hostile_class, name, says):
    verdict = hostile_class["results"][name].verdict
    assert verdict.status == "error" and says in verdict.error, verdict.error
    assert "Traceback" not in verdict.error


def test_the_daemon_is_gone(hostile_class):
    verdict = hostile_class["results"]["daemon_holding_files"].verdict
    assert _reports(verdict, "daemon") == ["started"]
    assert not [p for p in hostile_class["left"] if DAEMON_MARK in p]
    assert not list(hostile_class["work"].rglob("hold-*"))


def test_the_parent_and_its_environment_stay_hidden(hostile_class):
    verdict = hostile_class["results"]["reads_the_parents_proc"].verdict
    output = verdict.context.get("output", "")
    assert hostile_class["targets"].secret not in output and "GRADE_HOSTILE_SECRET" not in output
    if not _claims(verdict).get("own_proc"):
        pytest.skip("this kernel gave no own /proc: other processes stay listed (their environment does not)")
    pids = json.loads(_reports(verdict, "proc")[0].removeprefix("pids "))
    assert len(pids) <= 2 and os.getpid() not in pids, pids


def test_root_only_files_stay_closed_and_writes_stay_inside(hostile_class):
    verdict = hostile_class["results"]["reads_root_files_and_writes_outside"].verdict
    found = _reports(verdict, "root")
    if os.geteuid() == 0 and _claims(verdict).get("from_root"):
        assert "shadow: Permission denied" in found
        assert any(line.endswith("CapEff:\t0000000000000000") for line in found), found
    assert not [line for line in _reports(verdict, "write") if line.startswith("wrote")]


def test_processes_and_bytes_are_capped(hostile_class):
    verdict = hostile_class["results"]["forks_and_writes_without_end"].verdict
    claims = _claims(verdict)
    found = dict(line.split(" ", 1) for line in _reports(verdict, "limits") if line.startswith(("processes", "bytes")))
    if claims.get("process_limit") is None:
        pytest.skip(f"no cap on processes here: {claims.get('refused')}")
    assert int(found["processes"]) < claims["process_limit"]
    if claims.get("write_limit") is None:
        pytest.skip(f"no cap on bytes written here: {claims.get('refused')}")
    assert int(found["bytes"]) <= claims["write_limit"]


# A few attacks through `grade` itself in the default tier (a helper, the forker, a daemon, the
# network, the checks), beside the correct file; every file of the class in the slow tier.
THROUGH_GRADE = ("correct", "uses_any_helper", "kills_and_stalls_the_forker", "daemon_holding_files",
                 "sends_udp_and_unix_messages", "reads_the_checks")


def test_one_of_each_kind_through_grade(hostile_class, tmp_path):
    _through_grade(hostile_class, tmp_path, THROUGH_GRADE)


@pytest.mark.slow
def test_the_same_submissions_through_grade(hostile_class, tmp_path):
    _through_grade(hostile_class, tmp_path, None)


def _through_grade(hostile_class, tmp_path, names):
    """`grade --json` on files of the class (``names``, or all): a JSON verdict, exit 1 or 2 (0 for
    the correct one), the same status as in the batch; nothing left behind."""
    scratch_root = tmp_path / "scratch"
    scratch_root.mkdir()
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TMPDIR=str(scratch_root),
               GRADE_HOSTILE_SECRET=hostile_class["targets"].secret)
    paths = sorted(path for path in hostile_class["folder"].glob("*.py") if names is None or path.stem in names)
    assert names is None or len(paths) == len(names)
    running, finished = [], {}
    while paths or running:
        while paths and len(running) < 2:
            path = paths.pop(0)
            running.append((path, subprocess.Popen(
                [sys.executable, "-m", "grader", "exercise3", "--submission", str(path), "--json"],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)))
        path, process = running.pop(0)
        stdout, _ = process.communicate(timeout=900)
        finished[path.stem] = (process.returncode, json.loads(stdout))
    batch = hostile_class["results"]
    for name, (code, verdict) in finished.items():
        assert code in ((0,) if name == "correct" else (1, 2)), (name, code)
        assert verdict["status"] == batch[name].verdict.status, (name, verdict["error"])
    assert _leftover_processes([], scratch_root) == []
    assert os.listdir(scratch_root) == []
    assert hostile_class["targets"].received() == []


DEGRADED = r"""
import json, sys
from pathlib import Path
from grader.sandbox import seccomp
del seccomp.REFUSED["setsid"]  # such a container still lets a process start a session of its own
print(json.dumps(seccomp.install()), file=sys.stderr)  # from here on, no process may unshare or mount
from grader.api import Settings, grade
verdict = grade("exercise3", Path(sys.argv[1]), Settings(timeout=120))
print(json.dumps({"status": verdict.status, "error": verdict.error, "sandbox": verdict.context.get("sandbox"),
                  "claims": verdict.context.get("confinement"), "output": verdict.context.get("output")}))
"""


def test_where_the_kernel_refuses_namespaces_the_header_says_so_and_the_reaper_still_works(hostile_class,
                                                                                            tmp_path):
    """The grader run under a filter that refuses unshare and mount, as some containers do: the
    header claims no namespace and lists each refusal, and the daemon still ends with the grading
    (the reaper is a subreaper)."""
    scratch_root = tmp_path / "scratch"
    scratch_root.mkdir()
    daemon = hostile_class["folder"] / "daemon_holding_files.py"
    result = subprocess.run([sys.executable, "-c", DEGRADED, str(daemon)], capture_output=True, text=True,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TMPDIR=str(scratch_root)), timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    verdict = json.loads(result.stdout)
    claims = verdict["claims"]
    assert verdict["status"] == "failed" and "REPORT daemon started" in verdict["output"]
    assert not any(claims["namespaces"].values()) and claims["reaper"] == "subreaper"
    assert {"pid", "mount", "network", "ipc"} <= set(claims["refused"])
    assert "own PID" not in verdict["sandbox"] and "not applied: " in verdict["sandbox"]
    assert "killed at the end (subreaper)" in verdict["sandbox"]
    assert "at most 256 MiB written" not in verdict["sandbox"]
    assert _leftover_processes([], scratch_root) == []
    assert os.listdir(scratch_root) == []


# --------------------------------------------------------------------------- the judge and the machine's share


@pytest.mark.parametrize("name", ["mask_reduction_bomb", "heads_axis_bomb", "five_dimensional_mask"])
def test_evidence_sized_to_exhaust_its_reader_costs_only_its_own_grading(hostile_class, name):
    """A correct encoder that also claims an attention whose mask would broadcast to terabytes: its
    own mask checks are not verified, its judge stays small, and the classmates are untouched."""
    results = hostile_class["results"]
    verdict = results[name].verdict
    assert verdict.status == "failed", verdict.error
    failed = {c.id for c in verdict.checks if c.status == "failed"}
    assert "mask.masks_keys" in failed
    correct = results["correct"].verdict
    assert correct.status == "passed" and correct.score == correct.max_score
    solution_peak = correct.context["judge"]["peak_mb"]
    assert verdict.context["judge"]["peak_mb"] <= solution_peak + 200, verdict.context["judge"]


@pytest.mark.parametrize("name", ["declared_bias_bomb", "declared_gamma_bomb", "declared_kernel_bomb"])
def test_weights_declared_to_broadcast_in_the_judge_are_refused_by_their_shape(hostile_class, name):
    """A correct encoder whose report declares one weight (a bias, a gamma, a kernel) with the most
    values one array may hold, of shape (K, 1, 1, 1): the replay refuses the weight by its role's shape
    before any arithmetic, so the judge stays at the solution's size, and the verdict is an ordinary
    failure."""
    results = hostile_class["results"]
    verdict = results[name].verdict
    assert verdict.status == "failed", verdict.error
    solution_peak = results["correct"].verdict.context["judge"]["peak_mb"]
    assert verdict.context["judge"]["peak_mb"] <= solution_peak + 64, verdict.context["judge"]
    forward = next(c for c in verdict.checks if c.id == "forward.post_norm")
    declared = f"has the shape ({limits.MAX_ARRAY_ELEMENTS}, 1, 1, 1), not the"
    assert forward.status == "failed" and declared in forward.message, forward.message


def test_the_grader_itself_needs_no_more_memory_for_a_hostile_class(hostile_class):
    growth = hostile_class["parent_growth"]
    assert growth["hostile"] <= growth["solution"] + 300 * 1024 * 1024, growth


def test_memory_in_a_file_with_no_path_is_refused(hostile_class):
    verdict = hostile_class["results"]["memfd_hoard"].verdict
    found = _reports(verdict, "memfd")
    if not _claims(verdict).get("seccomp"):
        pytest.skip("no seccomp filter on this machine")
    assert found == ["refused: Operation not permitted"], found


def test_a_grading_cannot_read_the_checks_or_the_judge(hostile_class):
    verdict = hostile_class["results"]["reads_the_checks"].verdict
    found = _reports(verdict, "checks")
    if not _claims(verdict).get("landlock", {}).get("applied"):
        pytest.skip("no Landlock on this machine")
    assert len(found) == 4 and all(line.endswith("Permission denied") for line in found), found
    assert "assert" not in verdict.context.get("output", "")  # nothing of the checks reached the report


def test_many_spinning_processes_stay_one_grading(hostile_class):
    """A submission spinning every process it may start, each asking for a session of its own: no
    session is granted (a session would be a share of the CPU of its own), the processes are
    capped, and where the kernel gives a control group the grading is one process's share."""
    verdict = hostile_class["results"]["spins_in_many_sessions"].verdict
    claims = _claims(verdict)
    output = verdict.context.get("output", "")
    spinners = [line for line in _reports(verdict, "spin") if line.startswith("spinners ")]
    assert spinners, output
    if claims.get("seccomp"):
        assert "REPORT spin session" not in output
    if claims.get("process_limit"):
        assert int(spinners[0].split()[1]) < claims["process_limit"] <= 32
    if os.geteuid() == 0 and claims.get("cgroup") is None:
        pytest.skip(f"no control group for the grader here: {claims.get('refused', {}).get('cgroup')}")
    if claims.get("cgroup") is not None:
        assert claims["cgroup"]["processes"] <= 32
    assert hostile_class["results"]["correct"].verdict.status == "passed"


def test_the_leftover_search_sees_this_tests_processes_and_leaves_out_another_test_processes(tmp_path):
    """The search for what a grading left behind runs while the run's other test processes grade:
    a process marked as this test's is found wherever it hangs below this test process, one of the
    same kind below a sibling test process is not. Here this process stands for the controller,
    one child for this test process (itself marked) and another for a sibling with a marked child."""
    scratch_root = tmp_path / "scratch"
    mark = {"PATH": os.environ.get("PATH", ""), "LEFT_IN": str(scratch_root)}
    sleeper = [sys.executable, "-c", "import time; time.sleep(120)"]
    ours = subprocess.Popen(sleeper, env=mark)
    sibling = subprocess.Popen([sys.executable, "-c", "import subprocess, sys; "
                                f"subprocess.Popen({sleeper!r}, env={mark!r}).wait()"],
                               env={"PATH": mark["PATH"]})
    child = None
    try:
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:  # the sibling's grading: its child, once it runs
            children = Path(f"/proc/{sibling.pid}/task/{sibling.pid}/children").read_text().split()
            if children:
                child = int(children[0])
                if str(scratch_root).encode() in Path(f"/proc/{child}/environ").read_bytes():
                    break
            time.sleep(0.05)
        else:
            pytest.fail("the sibling's child never started")
        run = lambda: (os.getpid(), ours.pid)  # noqa: E731
        left = _leftover_processes([], scratch_root, run)
        assert [line for line in left if line.startswith(f"{ours.pid}: ")], left
        assert not [line for line in left if line.startswith(f"{child}: ")], left
        alone = _leftover_processes([], scratch_root, lambda: None)  # outside pytest-xdist: every one
        assert {line.split(":")[0] for line in alone} >= {str(ours.pid), str(child)}, alone
    finally:
        if child is not None:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for process in (ours, sibling):
            process.kill()
            process.wait()
