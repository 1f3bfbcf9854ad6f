"""Who the grading child runs as, and the resource limits it runs under.

Run as root, the child becomes a user of its own before the student's code
loads: a uid no account uses, drawn afresh for every grading, with no groups
and no capabilities. Root-only files are closed to it, it cannot signal or
read the processes of another grading, and the kernel's per-user count of
processes (``RLIMIT_NPROC``) becomes a cap on this one grading's processes.
Run as a user, the child keeps that uid, drops every capability its user
namespace gave it, and the same cap counts inside that user namespace; with
neither, processes are not capped and ``drop`` says so.
"""

from __future__ import annotations

import os
import resource
import secrets

from . import kernel

GRADING_NICE = 5  # below the grader and its judges: a grading never slows the one that judges it
UID_BASE = 1_900_000_000  # above the ranges Linux distributions and container tools hand out
UID_SPAN = 1 << 24


def grading_uid() -> int:
    """A uid for one grading (its gid is the same number)."""
    return UID_BASE + secrets.randbelow(UID_SPAN)


def limit_resources(memory_mb: int, file_bytes: int) -> None:
    """Address space, core dumps and the size of any one file: inherited by every process of the grading."""
    limit = int(memory_mb) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (file_bytes, file_bytes))


def share_fairly(limits: dict) -> dict:
    """In the keeper, before it starts anything: join the control groups the grader made for this
    grading (``grader.sandbox.cgroups``), become a session of its own (so the kernel's per-session CPU
    sharing counts the whole grading as one), and lower its priority below the grader's. Inherited
    by every process of the grading. {"cgroup": what applied or None, "nice", "refused": {...}}."""
    report: dict = {"cgroup": None, "refused": {}}
    joined = 0
    try:
        for path in limits.get("cgroups") or []:
            fd = os.open(path, os.O_WRONLY)
            try:
                os.write(fd, str(os.getpid()).encode("ascii"))
            finally:
                os.close(fd)
            joined += 1
        if joined:
            report["cgroup"] = limits.get("cgroup")
    except OSError as exc:
        report["refused"]["cgroup"] = f"joining it failed ({exc.strerror or exc})"
    if not joined and "cgroup" not in report["refused"]:
        report["refused"]["cgroup"] = str(limits.get("cgroup_refused") or "none was made for this grading")
    try:
        os.setsid()
    except OSError:
        pass  # already a session leader: a fresh grading process
    try:
        with open("/proc/self/autogroup", "w", encoding="ascii") as handle:
            handle.write(str(GRADING_NICE))
    except OSError:
        pass  # no autogroups: the nice value below is what counts
    try:
        os.nice(GRADING_NICE - os.nice(0))
    except OSError:
        pass
    report["nice"] = os.nice(0)
    return report


def drop(uid: int, gid: int, own_user_namespace: bool, max_processes: int) -> dict:
    """Become ``uid``/``gid`` when root and they differ, else give up every capability; then cap
    the processes. {"uid", "from_root", "capabilities", "process_limit", "refused": {...}}."""
    report: dict = {"from_root": False, "refused": {}}
    if os.geteuid() == 0 and not own_user_namespace and uid != 0:
        try:
            kernel.drop_capabilities_bounding()
            os.setgroups([])
            os.setresgid(gid, gid, gid)
            os.setresuid(uid, uid, uid)  # every uid non-zero: the kernel clears all capabilities
            report["from_root"] = True
        except OSError as exc:
            report["refused"]["user"] = exc.strerror or str(exc)
    if not report["from_root"]:
        try:
            kernel.drop_capabilities()
        except OSError as exc:
            report["refused"]["capabilities"] = exc.strerror or str(exc)
    try:
        kernel.prctl(kernel.PR_SET_DUMPABLE, 1)  # its own /proc entries stay its own after the change of user
    except OSError:
        pass
    report["uid"] = os.getuid()
    report["capabilities"] = kernel.effective_capabilities()
    report["process_limit"] = None
    counted_alone = report["from_root"] or own_user_namespace
    if not counted_alone:
        report["refused"]["process_limit"] = ("the kernel counts processes per user, and this user's own "
                                              "processes would count against it")
    elif os.geteuid() == 0:
        report["refused"]["process_limit"] = "root is not limited"
    else:
        try:
            resource.setrlimit(resource.RLIMIT_NPROC, (max_processes, max_processes))
            report["process_limit"] = max_processes
        except (OSError, ValueError) as exc:
            report["refused"]["process_limit"] = str(exc)
    return report
