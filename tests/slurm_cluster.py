"""A private single-node Slurm, started and stopped by the suite and the benchmarks.

Everything it runs on lives in one temporary folder: a munge daemon with its own key, socket, pid
and log files; a ``slurm.conf`` of its own, with its state and spool folders; a controller and a
node daemon on free ports of the loopback. Nothing of a Slurm or munge the machine may have
(``/etc/slurm``, ``/etc/munge``) is read or changed: Slurm's commands reach this cluster through
``Cluster.env`` (``SLURM_CONF``). ``private_slurm()`` yields the ``Cluster`` and, when the block
ends, cancels its jobs and stops every daemon it started, by its process id. Where Slurm cannot run
here (not root, no Slurm or munge installed, a daemon that does not start), it raises
``Unavailable``, saying why.

Jobs run as the user who submits them: root, since slurmd must be root to start them
(``SlurmdUser=root``, ``SlurmUser=root``). The node has the machine's memory and at most 2 CPUs;
processes are tracked through /proc (``proctrack/linuxproc``), with no cgroups and no binding
(``task/none``), so the cluster runs in a container as on a machine.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

DAEMONS = ("munged", "slurmctld", "slurmd")
COMMANDS = ("munge", "sbatch", "squeue", "scontrol", "scancel", "sinfo")
INSTALL = "apt-get install slurm-wlm munge (Debian's packages)"
NODE = "grader-node"
START_SECONDS = 120  # for a daemon to be ready, on a busy machine
# Job states after which a job never runs again (a pending job whose dependency can never be met
# is cancelled by --kill-on-invalid-dep, and so ends too).
ENDED = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE",
         "PREEMPTED"}


class Unavailable(Exception):
    """Slurm cannot run here; the message says why."""


@dataclass
class Cluster:
    folder: Path
    conf: Path
    env: dict
    daemons: dict[str, subprocess.Popen] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)

    def run(self, *args: str, check: bool = True) -> str:
        """A Slurm command against this cluster; its standard output."""
        done = subprocess.run(list(args), env=self.env, capture_output=True, text=True, timeout=120)
        if check and done.returncode != 0:
            raise RuntimeError(f"{' '.join(args)} failed ({done.returncode}): {done.stderr.strip()}")
        return done.stdout

    def jobs(self, job_id: str) -> list[dict[str, str]]:
        """``scontrol show job``'s fields of a job, one record per array task (none once forgotten)."""
        shown = self.run("scontrol", "--oneliner", "show", "job", str(job_id), check=False)
        return [_fields(line) for line in shown.splitlines() if line.strip().startswith("JobId=")]

    def wait(self, job_ids, seconds: float, poll: float = 2.0) -> dict[str, list[dict[str, str]]]:
        """Wait until every job of ``job_ids`` (every task of an array) has ended, at most ``seconds``;
        the jobs' records."""
        deadline = time.monotonic() + seconds
        while True:
            records = {job: self.jobs(job) for job in job_ids}
            if all(rs and all(r.get("JobState") in ENDED for r in rs) for rs in records.values()):
                return records
            if time.monotonic() > deadline:
                raise TimeoutError(f"Slurm jobs {', '.join(map(str, job_ids))} did not end within {seconds:.0f} s: "
                                   + "; ".join(f"{r.get('JobId')} {r.get('JobState')} ({r.get('Reason')})"
                                               for rs in records.values() for r in rs))
            self.check_daemons()
            time.sleep(poll)

    def time_limit(self, job_id: str) -> float:
        """The job's --time, in seconds (of its first task, for an array)."""
        (record, *_) = self.jobs(job_id)
        return _seconds(record.get("TimeLimit", ""))

    def check_daemons(self) -> None:
        for name, process in self.daemons.items():
            if process.poll() is not None:
                raise RuntimeError(f"{name} of the private Slurm ended ({process.returncode}): {self.tail(name)}")

    def tail(self, name: str, lines: int = 15) -> str:
        path = self.logs.get(name)
        if path is None or not path.is_file():
            return "(no log)"
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """Cancel every job, then stop the daemons, each by its own process id."""
        if self.daemons.get("slurmctld") is not None and self.daemons["slurmctld"].poll() is None:
            with contextlib.suppress(Exception):
                self.run("scancel", "--full", "--quiet", "--user", str(os.getuid()), check=False)
                deadline = time.monotonic() + 60
                while self.run("squeue", "--noheader", "--format=%i", check=False).strip() and \
                        time.monotonic() < deadline:
                    time.sleep(1)
        for name in reversed(list(self.daemons)):
            process = self.daemons[name]
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        self.daemons.clear()


def _fields(line: str) -> dict[str, str]:
    return dict(re.findall(r"(\S+?)=(\S*)", line))


def _seconds(limit: str) -> float:
    """A Slurm duration ([days-]hours:minutes:seconds) in seconds; UNLIMITED as a day."""
    found = re.fullmatch(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)", limit.strip())
    if not found:
        return 86400.0
    days, hours, minutes, seconds = (int(part or 0) for part in found.groups())
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _hardware() -> tuple[int, int]:
    """(CPUs, RealMemory in MiB) of this machine as slurmd counts them, so the node is never
    drained for claiming more than it has."""
    shown = subprocess.run(["slurmd", "-C"], capture_output=True, text=True, timeout=60).stdout
    found = _fields(shown.splitlines()[0] if shown else "")
    cpus = int(found.get("CPUs") or os.cpu_count() or 1)
    memory = int(found.get("RealMemory") or os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 2**20)
    return cpus, memory


def check_available() -> None:
    """Raise ``Unavailable`` where this machine cannot run the private cluster."""
    if os.geteuid() != 0:
        raise Unavailable("the private Slurm needs root (slurmd starts jobs as their user)")
    from .system_packages import installed

    missing = [name for name, path in installed(*DAEMONS, *COMMANDS).items() if path is None]
    if missing:
        raise Unavailable(f"no {', '.join(missing)} here: {INSTALL}")


def _start(cluster: Cluster, name: str, argv: list[str]) -> subprocess.Popen:
    log = cluster.folder / "log" / f"{name}.out"
    cluster.logs.setdefault(name, log)
    with open(log, "ab") as output:
        process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                                   env=cluster.env, start_new_session=True)
    cluster.daemons[name] = process
    return process


def _ready(cluster: Cluster, name: str, test) -> None:
    deadline = time.monotonic() + START_SECONDS
    while not test():
        if cluster.daemons[name].poll() is not None:
            raise Unavailable(f"{name} did not start ({cluster.daemons[name].returncode}): {cluster.tail(name)}")
        if time.monotonic() > deadline:
            raise Unavailable(f"{name} was not ready within {START_SECONDS} s: {cluster.tail(name)}")
        time.sleep(0.2)


def _node_idle(cluster: Cluster) -> bool:
    state = cluster.run("sinfo", "--noheader", "--nodes", NODE, "--format=%T", check=False).strip()
    return state.rstrip("*~#") in ("idle", "mixed", "allocated")


def write_config(folder: Path, munge_socket: Path, cpus: int, memory: int) -> Path:
    for name in ("state", "spool", "log"):
        (folder / name).mkdir(exist_ok=True)
    host = socket.gethostname().split(".")[0]
    conf = folder / "slurm.conf"
    conf.write_text(f"""\
ClusterName=grader
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={_free_port()}
SlurmdPort={_free_port()}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge_socket},cred_expire=30
StateSaveLocation={folder / 'state'}
SlurmdSpoolDir={folder / 'spool'}
SlurmctldPidFile={folder / 'slurmctld.pid'}
SlurmdPidFile={folder / 'slurmd.pid'}
SlurmctldLogFile={folder / 'log' / 'slurmctld.log'}
SlurmdLogFile={folder / 'log' / 'slurmd.log'}
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
SchedulerType=sched/backfill
SchedulerParameters=bf_interval=5
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
MpiDefault=none
MailProg=/bin/true
ReturnToService=2
MinJobAge=86400
KillWait=10
NodeName={NODE} NodeAddr=127.0.0.1 NodeHostname={host} CPUs={cpus} RealMemory={memory} State=UNKNOWN
PartitionName=grading Nodes={NODE} Default=YES MaxTime=INFINITE State=UP
""", encoding="utf-8")
    return conf


@contextlib.contextmanager
def private_slurm():
    """A private single-node Slurm for the block; ``Unavailable`` where it cannot start."""
    check_available()
    folder = Path(tempfile.mkdtemp(prefix="grade-slurm-"))
    if re.search(r"[\s#=,]", str(folder)):
        shutil.rmtree(folder, ignore_errors=True)
        raise Unavailable(f"the temporary folder {folder} holds a character slurm.conf cannot take")
    cluster = None
    try:
        munge = folder / "munge"
        munge.mkdir(mode=0o700)
        key = munge / "munge.key"
        key.write_bytes(os.urandom(1024))
        key.chmod(0o600)
        munge_socket = munge / "munge.socket"
        cpus, memory = _hardware()
        conf = write_config(folder, munge_socket, min(cpus, 2), memory)
        env = {name: value for name, value in os.environ.items() if not name.startswith("SLURM_")}
        cluster = Cluster(folder, conf, dict(env, SLURM_CONF=str(conf)))
        cluster.logs.update(munged=munge / "munged.log", slurmctld=folder / "log" / "slurmctld.log",
                            slurmd=folder / "log" / "slurmd.log")
        # --force: munged otherwise refuses a socket below a folder others cannot enter (a temporary one)
        _start(cluster, "munged", ["munged", "--foreground", "--force", f"--key-file={key}",
                                   f"--socket={munge_socket}", f"--pid-file={munge / 'munged.pid'}",
                                   f"--log-file={munge / 'munged.log'}", f"--seed-file={munge / 'munged.seed'}"])
        _ready(cluster, "munged", lambda: subprocess.run(
            ["munge", "--no-input", f"--socket={munge_socket}"], capture_output=True, timeout=30).returncode == 0)
        _start(cluster, "slurmctld", ["slurmctld", "-D", "-f", str(conf)])
        _ready(cluster, "slurmctld", lambda: cluster.run("scontrol", "ping", check=False).find("UP") >= 0)
        _start(cluster, "slurmd", ["slurmd", "-D", "-f", str(conf), "-N", NODE])
        _ready(cluster, "slurmd", lambda: _node_idle(cluster))
        yield cluster
    finally:
        if cluster is not None:
            cluster.stop()
        shutil.rmtree(folder, ignore_errors=True)
