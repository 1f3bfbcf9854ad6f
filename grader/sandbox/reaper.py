"""Every process a submission starts ends when its grading ends.

A grading runs as three processes, all of them this package's code until the
last one loads the submission:

- the keeper (the process the grader started, or the batch worker forked)
  enters new namespaces (``namespaces.enter``), forks the reaper, waits for it
  and writes how the grading process ended on its status pipe — the one
  thing the grader learns from it. SIGTERM asks it to end the grading now.
- the reaper is PID 1 of the new PID namespace where the kernel allows one,
  and a child subreaper in any case, so every process the submission starts
  (in a new session, double-forked) stays its descendant. It makes the mounts
  (``namespaces.prepare_mounts``), forks the grading process and reaps what
  ends. When the grading process ends, when the keeper passes on SIGTERM, or at
  its own backstop deadline, it kills every descendant and waits for them all.
  It dies with the keeper (``PR_SET_PDEATHSIG``); in a PID namespace the kernel
  then kills every process left in it.
- the grading process runs ``body``: it imports TensorFlow, confines itself and
  loads the submission. It dies with the reaper.
"""

from __future__ import annotations

import json
import os
import signal

from . import kernel, landlock, namespaces, privileges

BACKSTOP_GRACE = 10.0  # the reaper ends the grading itself this long after the grader's limits (start-up and time)


def keep(job: dict, body, evidence_fd: int, control_fd: int, status_fd: int, fairness: dict | None = None) -> None:
    """The keeper: run ``body(setup)`` in a grading process of its own namespaces; never returns.
    ``setup`` tells the grading process what was prepared for it (namespaces, mounts, its uid, and
    ``fairness``: the control group and priority the keeper took, ``privileges.share_fairly``)."""
    limits = job["limits"]
    entered = namespaces.enter()
    root_alone = os.geteuid() == 0 and not entered["user"]
    uid = privileges.grading_uid() if root_alone else os.getuid()
    gid = uid if root_alone else os.getgid()
    environment = sorted(os.environ)  # what the grader passed, before any library adds its own
    keeper = _pidfd_of_self()
    read_end, write_end = os.pipe()
    reaper = os.fork()
    if reaper == 0:
        try:
            os.close(read_end)
            os.close(status_fd)
            _reap(job, body, keeper, dict(entered, environment=environment, fairness=fairness or {}), (uid, gid),
                  evidence_fd, control_fd,
                  write_end, float(limits.get("startup", 0.0)) + float(limits["timeout"]) + BACKSTOP_GRACE)
        except BaseException:
            _report_failure("the reaper")
        finally:
            os._exit(70)
    os.close(write_end)
    if keeper is not None:
        os.close(keeper)
    os.close(evidence_fd)
    os.close(control_fd)
    signal.signal(signal.SIGTERM, lambda *_: _forward(reaper))
    try:
        os.waitpid(reaper, 0)
    except ChildProcessError:
        pass
    report = _read_small(read_end)
    try:
        os.write(status_fd, report or json.dumps({"status": None, "ended": "lost"}).encode() + b"\n")
    except OSError:
        pass
    os._exit(0)


def _report_failure(who: str) -> None:
    """A failure of this package's own code, on stderr (the grader shows it as an internal error)."""
    import traceback

    try:
        os.write(2, f"grader: {who} failed:\n{traceback.format_exc()}".encode("utf-8", "replace"))
    except OSError:
        pass


def _forward(reaper: int) -> None:
    try:
        os.kill(reaper, signal.SIGTERM)
    except ProcessLookupError:
        pass


def _read_small(fd: int, limit: int = 4096) -> bytes:
    chunks, total = [], 0
    while total < limit:
        block = os.read(fd, limit - total)
        if not block:
            break
        chunks.append(block)
        total += len(block)
    os.close(fd)
    return b"".join(chunks)


def _pidfd_of_self() -> int | None:
    try:
        return os.pidfd_open(os.getpid())
    except (OSError, AttributeError):
        return None


def _gone(pidfd: int | None) -> bool:
    """Whether the process of ``pidfd`` has ended (unknown without pidfds: assumed not)."""
    if pidfd is None:
        return False
    import select

    poller = select.poll()
    poller.register(pidfd, select.POLLIN)
    return bool(poller.poll(0))


def _reap(job, body, keeper: int | None, entered: dict, owner: tuple[int, int], evidence_fd: int, control_fd: int,
          status_write: int, backstop: float) -> None:
    kernel.prctl(kernel.PR_SET_PDEATHSIG, signal.SIGKILL)
    if _gone(keeper):  # the keeper died before the line above could tie the reaper to it
        os._exit(1)
    if keeper is not None:
        os.close(keeper)
    kernel.prctl(kernel.PR_SET_CHILD_SUBREAPER, 1)
    stopped: list[str] = []  # why the grading process was stopped early, if it was
    grading = 0

    def stop(reason):
        def handler(*_):
            if not stopped:
                stopped.append(reason)
            if grading > 0:
                os.kill(grading, signal.SIGKILL)  # the wait below returns; the rest is killed after it
        return handler

    signal.signal(signal.SIGTERM, stop("stopped"))
    signal.signal(signal.SIGALRM, stop("deadline"))
    for name in ("SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"):
        signal.signal(getattr(signal, name), signal.SIG_IGN)
    signal.setitimer(signal.ITIMER_REAL, backstop)
    scratch = os.path.dirname(job["submission"])
    compiled = job["limits"].get("compiled")
    mounts = namespaces.prepare_mounts(entered, scratch, int(job["limits"]["write_bytes"]), owner,
                                       [*landlock.python_paths(), landlock.package_folder(),
                                        *([compiled["folder"]] if compiled else [])])
    reaper = os.getpid()
    grading = os.fork()
    if grading == 0:
        try:
            signal.setitimer(signal.ITIMER_REAL, 0)
            for name in ("SIGTERM", "SIGALRM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"):
                signal.signal(getattr(signal, name), signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            os.close(status_write)
            kernel.prctl(kernel.PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != reaper:
                os._exit(1)
            os.chdir(scratch)  # the tmpfs mounted over it, not the folder beneath
            body({"namespaces": entered, "mounts": mounts, "environment": entered["environment"],
                  "fairness": entered.get("fairness") or {},
                  "reaper": "pid-namespace" if entered.get("pid") else "subreaper"})
        except BaseException:
            _report_failure("the grading process")
        finally:
            os._exit(70)
    os.close(evidence_fd)
    os.close(control_fd)
    if stopped:
        os.kill(grading, signal.SIGKILL)
    status = None
    while status is None:
        try:
            child, child_status = os.waitpid(-1, 0)
        except ChildProcessError:
            break
        if child == grading:
            status = child_status
    signal.setitimer(signal.ITIMER_REAL, 0)
    for child, child_status in kill_descendants(bool(entered.get("pid"))):
        if child == grading and status is None:
            status = child_status
    try:
        os.write(status_write, json.dumps({"status": status, "ended": stopped[0] if stopped else "exit"}).encode()
                 + b"\n")
    finally:
        os._exit(0)


def kill_descendants(pid_namespace: bool):
    """Kill every descendant of this process and reap them; yield (pid, wait status) of each.

    As PID 1 of a PID namespace, ``kill(-1)`` reaches every other process in it. Otherwise this
    process is a child subreaper: orphans of its descendants become its children, so killing its
    children until none is left kills them all."""
    while True:
        if pid_namespace:
            try:
                os.kill(-1, signal.SIGKILL)
            except ProcessLookupError:
                pass
        else:
            for child in children(os.getpid()):
                try:
                    os.kill(child, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        try:
            yield os.waitpid(-1, 0)
        except ChildProcessError:
            return


def children(pid: int) -> list[int]:
    """The children of ``pid``, from /proc."""
    found: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children", encoding="ascii") as handle:
                found.extend(int(p) for p in handle.read().split())
        return found
    except OSError:
        pass
    for entry in os.listdir("/proc"):  # kernels without /proc/<pid>/task/<tid>/children
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as handle:
                    fields = handle.read().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(fields[1]) == pid:
                found.append(int(entry))
    return found
