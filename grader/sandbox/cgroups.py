"""A control group per grading, where the kernel lets the grader make one.

Limits on a process (its address space, its processes as a user) miss what a
grading can hold or take as a whole: memory in files with no path or in a
tmpfs, counted in no process's address space; CPU time spread over many
processes. A control group counts all of it. Where the grader may create
groups below its own (cgroup v1's memory, pids and cpu controllers, or the
same controllers enabled in a delegated cgroup v2 subtree), each grading gets a
group of its own, made by the grader below a folder of its own
(``grade-<pid>-<token>``) before the grading starts: memory including shared
memory and tmpfs capped at the grading's memory limit, a cap on its processes
and threads, and the CPU weight of one ordinary process, so a grading that
starts many processes shares one process's CPU with its classmates. The keeper
joins the groups before it starts anything (``grader.sandbox.reaper``); the
grader reads whether the kernel ended a process for memory, and removes the
group when the grading is over, and its own folder when it exits (a signal
that ends it as SIGTERM does, included). A grader that was killed outright
removes nothing: the next grader, when it starts, removes the folders of
graders whose process is gone (named ``grade-<pid>-<token>`` beside its own,
and empty of processes). Nothing here touches any other group; what the
kernel does not allow is said, with the reason, and the grading goes on under
the other limits.
"""

from __future__ import annotations

import os
import re
import secrets
import threading
import time

CONTROLLERS = ("memory", "pids", "cpu")
CPU_SHARES = 1024  # v1: the weight of one process at nice 0
CPU_WEIGHT = 100  # v2: the same
REMOVE_SECONDS = 5.0  # how long removing a group may wait for the kernel to release its last process


class Hierarchy:
    """Where this grader process may create groups: {controller: folder} (v1) or one folder (v2)."""

    def __init__(self, version: int, folders: dict[str, str]):
        self.version = version
        self.folders = folders  # the grader's own folder in each controller's hierarchy
        self._count = 0
        self._lock = threading.Lock()

    def new_group(self, memory_bytes: int, processes: int) -> "GradingGroup":
        with self._lock:
            self._count += 1
            name = f"g{self._count}"
        return GradingGroup(self, name, memory_bytes, processes)


class GradingGroup:
    """One grading's groups, created at construction; ``procs`` are the files its keeper joins."""

    def __init__(self, hierarchy: Hierarchy, name: str, memory_bytes: int, processes: int):
        self.version = hierarchy.version
        self.paths: dict[str, str] = {}
        made: list[str] = []
        try:
            for controller, folder in hierarchy.folders.items():
                path = os.path.join(folder, name)
                if path not in made:
                    os.mkdir(path)
                    made.append(path)
                self.paths[controller] = path
            if self.version == 1:
                _write(self.paths["memory"], "memory.limit_in_bytes", memory_bytes)
                _write(self.paths["memory"], "memory.memsw.limit_in_bytes", memory_bytes, optional=True)
                _write(self.paths["pids"], "pids.max", processes)
                _write(self.paths["cpu"], "cpu.shares", CPU_SHARES)
            else:
                path = self.paths["memory"]
                _write(path, "memory.max", memory_bytes)
                _write(path, "memory.swap.max", 0, optional=True)
                _write(path, "pids.max", processes)
                _write(path, "cpu.weight", CPU_WEIGHT)
        except OSError:
            for path in reversed(made):
                _remove(path, 0.0)
            raise
        self._made = made
        self.memory_bytes = memory_bytes
        self.processes = processes

    @property
    def procs(self) -> list[str]:
        return [os.path.join(path, "cgroup.procs") for path in self._made]

    def describe(self) -> dict:
        """What the keeper says it joined, for the report: the limits applied."""
        return {"version": self.version, "memory_bytes": self.memory_bytes, "processes": self.processes}

    def out_of_memory(self) -> bool:
        """Whether the kernel ended a process of the grading because the group's memory was full."""
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        try:
            with open(os.path.join(self.paths["memory"], name), encoding="ascii") as handle:
                for line in handle:
                    key, _, value = line.partition(" ")
                    if key == "oom_kill" and value.strip().isdigit():
                        return int(value) > 0
        except OSError:
            pass
        return False

    def remove(self) -> None:
        """Remove the groups (every process in them has ended, or ends within REMOVE_SECONDS)."""
        for path in reversed(self._made):
            _remove(path, REMOVE_SECONDS)
        self._made = []


def _write(folder: str, name: str, value: int, optional: bool = False) -> None:
    try:
        with open(os.path.join(folder, name), "w", encoding="ascii") as handle:
            handle.write(str(int(value)))
    except OSError:
        if not optional:
            raise


def _remove(path: str, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while True:
        try:
            os.rmdir(path)
            return
        except FileNotFoundError:
            return
        except OSError:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.02)


_hierarchy: Hierarchy | None = None
_reason: str | None = None
_detected = False
_detect_lock = threading.Lock()


def hierarchy() -> tuple[Hierarchy | None, str | None]:
    """(this process's Hierarchy, None), or (None, why groups cannot be made here); found once."""
    global _hierarchy, _reason, _detected
    with _detect_lock:
        if not _detected:
            _detected = True
            if os.environ.get("GRADE_CGROUPS", "").lower() in ("0", "no", "off"):
                _reason = "turned off (GRADE_CGROUPS)"
            else:
                try:
                    _hierarchy = _find()
                except OSError as exc:
                    _reason = f"the grader may not create control groups here ({exc.strerror or exc})"
                except LookupError as exc:
                    _reason = str(exc)
        return _hierarchy, _reason


GRADER_FOLDER = re.compile(r"grade-(\d+)-[0-9a-f]{8}")


def remove_stale(folder: str) -> list[str]:
    """Remove, in ``folder``, the groups of graders that no longer run (``grade-<pid>-<token>`` whose
    process has ended, or whose pid now belongs to a process started after the group was made), with
    their gradings' groups; a group that still holds a process stays. The folders removed."""
    removed = []
    try:
        entries = os.listdir(folder)
    except OSError:
        return removed
    for name in entries:
        match = GRADER_FOLDER.fullmatch(name)
        path = os.path.join(folder, name)
        if match is None or not os.path.isdir(path) or not _gone(int(match.group(1)), path):
            continue
        try:
            inner = [os.path.join(path, entry) for entry in os.listdir(path)
                     if os.path.isdir(os.path.join(path, entry))]
        except OSError:
            continue
        for group in inner:
            _remove(group, 0.0)
        _remove(path, 0.0)
        if not os.path.exists(path):
            removed.append(path)
    return removed


def _gone(pid: int, path: str) -> bool:
    """Whether the grader that made the group at ``path`` has ended."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        pass  # a process of another user holds the pid: the group is its, or that grader's
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/stat", encoding="ascii") as machine:
            booted = next(int(line.split()[1]) for line in machine if line.startswith("btime "))
        started = booted + ticks / os.sysconf("SC_CLK_TCK")
        return started > os.stat(path).st_mtime + 1  # the pid was reused after the group was made
    except (OSError, ValueError, IndexError, StopIteration):
        return False


def _find() -> Hierarchy:
    own = _own_groups()
    mounts = _mounts()
    token = f"grade-{os.getpid()}-{secrets.token_hex(4)}"
    if "" in own and "cgroup2" in mounts:  # a unified hierarchy with the controllers delegated to us
        mount, root = mounts["cgroup2"]
        folder = _inside(mount, root, own[""])
        if folder is not None:
            try:
                with open(os.path.join(folder, "cgroup.subtree_control"), encoding="ascii") as handle:
                    enabled = set(handle.read().split())
            except OSError:
                enabled = set()
            if set(CONTROLLERS) <= enabled:
                remove_stale(folder)
                base = os.path.join(folder, token)
                os.mkdir(base)
                try:
                    with open(os.path.join(base, "cgroup.subtree_control"), "w", encoding="ascii") as handle:
                        handle.write(" ".join(f"+{c}" for c in CONTROLLERS))
                except OSError:
                    _remove(base, 0.0)
                    raise
                _forget_at_exit([base])
                return Hierarchy(2, {c: base for c in CONTROLLERS})
    folders = {}
    for controller in CONTROLLERS:
        if controller not in own or controller not in mounts:
            raise LookupError(f"no cgroup {controller} controller is mounted for the grader")
        mount, root = mounts[controller]
        folder = _inside(mount, root, own[controller])
        if folder is None:
            raise LookupError(f"the grader's {controller} group is outside the mounted hierarchy")
        folders[controller] = folder
    made = []
    try:
        for controller, folder in folders.items():
            remove_stale(folder)
            base = os.path.join(folder, token)
            os.mkdir(base)
            made.append(base)
            folders[controller] = base
    except OSError:
        for base in made:
            _remove(base, 0.0)
        raise
    _forget_at_exit(made)
    return Hierarchy(1, folders)


def _own_groups() -> dict[str, str]:
    """{controller: path} of this process's groups (v2's under the key "")."""
    groups = {}
    with open("/proc/self/cgroup", encoding="utf-8") as handle:
        for line in handle:
            parts = line.rstrip("\n").split(":", 2)
            if len(parts) != 3:
                continue
            _, controllers, path = parts
            if controllers == "":
                groups[""] = path
            for controller in controllers.split(","):
                if controller in CONTROLLERS:
                    groups[controller] = path
    return groups


def _mounts() -> dict[str, tuple[str, str]]:
    """{controller or "cgroup2": (mount point, root of the mount)}."""
    found: dict[str, tuple[str, str]] = {}
    with open("/proc/self/mountinfo", encoding="utf-8") as handle:
        for line in handle:
            left, _, right = line.partition(" - ")
            fields, tail = left.split(), right.split()
            if len(fields) < 5 or len(tail) < 3:
                continue
            root, point = fields[3], fields[4].replace("\\040", " ")
            if tail[0] == "cgroup2":
                found.setdefault("cgroup2", (point, root))
            elif tail[0] == "cgroup":
                for option in tail[2].split(","):
                    if option in CONTROLLERS:
                        found.setdefault(option, (point, root))
    return found


def _inside(mount: str, root: str, path: str) -> str | None:
    root = root.rstrip("/")
    if root and not (path == root or path.startswith(root + "/")):
        return None
    relative = path[len(root):].lstrip("/")
    folder = os.path.join(mount, relative) if relative else mount
    return folder if os.path.isdir(folder) else None


def _forget_at_exit(folders: list[str]) -> None:
    import atexit

    atexit.register(lambda: [_remove(folder, 1.0) for folder in reversed(folders)])
