"""Fresh Linux namespaces for one grading, and the mounts made inside them.

``enter`` moves the calling process into new PID, mount, network and IPC
namespaces (through a user namespace when it is not root), each one the kernel
allows; the process it forks next is PID 1 of the new PID namespace.
``prepare_mounts`` then, from inside: makes every mount private (nothing
propagates back to the machine), mounts a /proc that shows only the
grading's own processes, and mounts a size-capped tmpfs over the scratch
folder, so the total a submission writes is bounded and vanishes with the
namespace. Whatever the kernel refuses is left out of the returned report,
with the reason.
"""

from __future__ import annotations

import os
import stat

from . import kernel

# name in the report -> clone flag
NAMESPACES = {"pid": kernel.CLONE_NEWPID, "mount": kernel.CLONE_NEWNS, "network": kernel.CLONE_NEWNET,
              "ipc": kernel.CLONE_NEWIPC}


def enter() -> dict:
    """Unshare what the kernel allows; {"user": bool, "pid": bool, ..., "refused": {name: reason}}."""
    report: dict = {"user": False, "refused": {}}
    if os.geteuid() != 0:
        uid, gid = os.geteuid(), os.getegid()
        try:
            kernel.unshare(kernel.CLONE_NEWUSER)
            _write("/proc/self/setgroups", "deny")
            _write("/proc/self/uid_map", f"{uid} {uid} 1")
            _write("/proc/self/gid_map", f"{gid} {gid} 1")
            report["user"] = True
        except OSError as exc:
            report["refused"]["user"] = exc.strerror or str(exc)
    for name, flag in NAMESPACES.items():
        try:
            kernel.unshare(flag)
            report[name] = True
        except OSError as exc:
            report[name] = False
            report["refused"][name] = exc.strerror or str(exc)
    return report


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode("ascii"))
    finally:
        os.close(fd)


def prepare_mounts(namespaces: dict, scratch: str, write_bytes: int, owner: tuple[int, int],
                   readable: list[str]) -> dict:
    """Inside the new namespaces (as PID 1 of the PID namespace): private mounts, an own /proc,
    the ``readable`` folders and the scratch folder reachable by ``owner`` (the user the grading
    process will become), and a tmpfs of ``write_bytes`` over ``scratch``, owned by that user, with
    the submission copied in. When ``owner`` could still not reach a folder it needs, the grading
    process keeps this process's user and the report says why.
    Returns {"proc": bool, "tmpfs": bool, "exposed": [...], "owner": (uid, gid), "refused": {...}}."""
    report: dict = {"proc": False, "tmpfs": False, "exposed": [], "owner": owner, "refused": {}}
    private = False
    if not namespaces.get("mount"):
        report["refused"]["mounts"] = "no mount namespace"
    else:
        try:
            kernel.mount(None, "/", None, kernel.MS_REC | kernel.MS_PRIVATE)
            private = True
        except OSError as exc:  # a shared mount would propagate to the machine: mount nothing
            report["refused"]["mounts"] = exc.strerror or str(exc)
    if private and namespaces.get("pid"):
        try:
            _mount_proc()
            report["proc"] = True
        except OSError as exc:
            report["refused"]["proc"] = exc.strerror or str(exc)
    uid = owner[0]
    if uid != os.geteuid():
        if private:
            try:
                report["exposed"] = expose([*readable, os.path.dirname(scratch)])
            except OSError as exc:
                report["refused"]["exposed"] = exc.strerror or str(exc)
        blocked = [p for p in readable if _blocker(p, uid)]
        blocked += [p for p in [os.path.dirname(scratch)] if _blocker(p, uid, listing=False)]
        if blocked:
            report["refused"]["user"] = f"{blocked[0]} cannot be reached by another user"
            report["owner"] = owner = (os.geteuid(), os.getegid())
    if private:
        try:
            _mount_scratch(scratch, write_bytes, owner)
            report["tmpfs"] = True
        except OSError as exc:
            report["refused"]["tmpfs"] = exc.strerror or str(exc)
    return report


def _blocker(path: str, uid: int, listing: bool = True) -> str | None:
    """The first folder from / down to ``path`` that user ``uid`` (with group ``uid`` and no other)
    cannot enter, or ``path`` itself when ``listing`` and it cannot list it; None when it can."""
    def allowed(st, bit):  # bit: the "other" permission bit (S_IXOTH or S_IROTH)
        if st.st_uid == uid:
            return st.st_mode & (bit << 6)
        if st.st_gid == uid:
            return st.st_mode & (bit << 3)
        return st.st_mode & bit

    current = "/"
    for part in [p for p in os.path.realpath(path).split("/") if p]:
        current = os.path.join(current, part)
        try:
            st = os.stat(current)
        except OSError:
            return current
        if stat.S_ISDIR(st.st_mode) and not allowed(st, stat.S_IXOTH):
            return current
    if listing:
        try:
            st = os.stat(path)
        except OSError:
            return path
        if stat.S_ISDIR(st.st_mode) and not allowed(st, stat.S_IROTH):
            return path
    return None


def expose(paths: list[str]) -> list[str]:
    """Make ``paths`` reachable by any user when a folder above them is not (a Python installed under
    /root): that folder is covered by an empty tmpfs (so nothing else of it shows) holding bind
    mounts of the paths beneath it. Returns the folders covered."""
    needed = sorted({os.path.realpath(p) for p in paths if os.path.isdir(p)})
    covers: dict[str, list[str]] = {}
    for path in needed:  # a path beneath another needs its own cover where a folder between blocks it
        blocker = _blocker(path, -1, listing=False)
        if blocker is not None and blocker != path:
            covers.setdefault(blocker, []).append(path)
    for folder, beneath in covers.items():  # of one cover's paths, only the outermost are mounted
        covers[folder] = [p for p in beneath if not any(p != q and p.startswith(q.rstrip("/") + "/") for q in beneath)]
    for folder, beneath in sorted(covers.items(), key=lambda item: len(item[0])):
        handles = {path: os.open(path, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC) for path in beneath}
        try:
            kernel.mount("tmpfs", folder, "tmpfs", kernel.MS_NOSUID | kernel.MS_NODEV | kernel.MS_NOEXEC,
                         "size=1m,nr_inodes=1000,mode=0755")
            for path, handle in handles.items():
                os.makedirs(path, mode=0o755, exist_ok=True)
                kernel.mount(f"/proc/self/fd/{handle}", path, None, kernel.MS_BIND | kernel.MS_REC)
        finally:
            for handle in handles.values():
                os.close(handle)
    return sorted(covers)


def _mount_proc() -> None:
    flags = kernel.MS_NOSUID | kernel.MS_NODEV | kernel.MS_NOEXEC
    try:
        kernel.mount("proc", "/proc", "proc", flags, "hidepid=invisible")
    except OSError:
        kernel.mount("proc", "/proc", "proc", flags, "hidepid=2")


def _mount_scratch(scratch: str, write_bytes: int, owner: tuple[int, int]) -> None:
    """The scratch folder's files, moved onto a fresh tmpfs mounted over it."""
    files = {}
    for entry in os.scandir(scratch):
        if entry.is_file(follow_symlinks=False):
            with open(entry.path, "rb") as handle:
                files[entry.name] = handle.read()
    uid, gid = owner
    kernel.mount("tmpfs", scratch, "tmpfs", kernel.MS_NOSUID | kernel.MS_NODEV | kernel.MS_NOEXEC,
                 f"size={int(write_bytes)},nr_inodes=10000,mode=0700,uid={uid},gid={gid}")
    for name, data in files.items():
        path = os.path.join(scratch, name)
        with open(path, "wb") as handle:
            handle.write(data)
        os.chown(path, uid, gid)
