"""The grading process confines itself, after TensorFlow's import and before the submission loads.

In this order: it gives up root or its capabilities and caps its processes
(``privileges``), restricts the files it may read and write (``landlock``), and
refuses sockets and the other ways out (``seccomp``). ``confine`` returns the
report the parent puts in the verdict's header: what applied on this machine,
from the namespaces and mounts its reaper prepared to these last steps, and
for whatever did not, why.
"""

from __future__ import annotations

import os

from . import landlock, privileges, seccomp


def confine(scratch: str, setup: dict, limits: dict) -> dict:
    """Apply every measure the kernel allows; the report of what applied."""
    entered = setup.get("namespaces", {})
    mounts = setup.get("mounts", {})
    uid, gid = mounts.get("owner", (os.getuid(), os.getgid()))
    fairness = setup.get("fairness") or {}
    refused = dict(entered.get("refused", {}))
    refused.update(mounts.get("refused", {}))
    refused.update(fairness.get("refused", {}))
    if os.geteuid() == 0 and uid != 0 and not mounts.get("tmpfs"):
        _give(scratch, uid, gid)  # the scratch folder on disk: the grading's user must write there
    user = privileges.drop(uid, gid, bool(entered.get("user")), int(limits["processes"]))
    refused.update(user.pop("refused"))
    ruleset = landlock.restrict(scratch, landlock.python_paths(), [str(path) for path in limits.get("hidden", [])],
                                [str(path) for path in limits.get("grant", [])], limits.get("compiled"))
    if not ruleset.get("applied"):
        refused["landlock"] = ruleset.get("reason", "not applied")
    syscalls = seccomp.install()
    if not syscalls.get("applied"):
        refused["seccomp"] = syscalls.get("reason", "not applied")
    return {
        "landlock": ruleset,
        "seccomp": bool(syscalls.get("applied")),
        "namespaces": {name: bool(entered.get(name)) for name in ("user", "pid", "mount", "network", "ipc")},
        "reaper": setup.get("reaper", "subreaper"),
        "exposed": list(mounts.get("exposed", [])),
        "own_proc": bool(mounts.get("proc")),
        "write_limit": int(limits["write_bytes"]) if mounts.get("tmpfs") else None,
        "file_limit": int(limits["file_bytes"]),
        "process_limit": user["process_limit"],
        "cgroup": fairness.get("cgroup"),
        "nice": fairness.get("nice"),
        "uid": user["uid"],
        "from_root": user["from_root"],
        "capabilities": user["capabilities"],
        "environment": list(setup.get("environment", sorted(os.environ))),
        "refused": {str(k): str(v)[:200] for k, v in refused.items()},
    }


def _give(scratch: str, uid: int, gid: int) -> None:
    os.chown(scratch, uid, gid)
    for entry in os.scandir(scratch):
        if entry.is_file(follow_symlinks=False):
            os.chown(entry.path, uid, gid)
