"""Confines the grading child with Linux Landlock, before the student's code runs.

Once applied (it cannot be undone, and is inherited by anything the child
starts), the process may:
- write, create and delete files only inside its scratch folder;
- read only the Python installation and system folders, and of the grader
  package only the files it is granted one by one (what the grading process
  runs: ``grader.exercises.reads``) — not the solutions, the checks, other
  submissions or the user's files;
- open no TCP connection and bind no TCP port;
- send no signal to, and reach no abstract socket of, processes outside it,
  so it cannot stop the grader.

Landlock needs Linux 5.13 or newer; network rules need ABI 4 and scoping ABI 6.
Where the kernel lacks it, ``restrict`` says what it could not apply and the
child runs under its time and memory limits only.
"""

from __future__ import annotations

import ctypes
import os
import sys

SYS_CREATE_RULESET, SYS_ADD_RULE, SYS_RESTRICT_SELF = 444, 445, 446  # same on x86_64 and aarch64
CREATE_RULESET_VERSION = 1 << 0
RULE_PATH_BENEATH = 1
PR_SET_NO_NEW_PRIVS = 38

EXECUTE, WRITE_FILE, READ_FILE, READ_DIR = 1 << 0, 1 << 1, 1 << 2, 1 << 3
REMOVE_DIR, REMOVE_FILE, MAKE_CHAR, MAKE_DIR = 1 << 4, 1 << 5, 1 << 6, 1 << 7
MAKE_REG, MAKE_SOCK, MAKE_FIFO, MAKE_BLOCK, MAKE_SYM = 1 << 8, 1 << 9, 1 << 10, 1 << 11, 1 << 12
REFER, TRUNCATE, IOCTL_DEV = 1 << 13, 1 << 14, 1 << 15
NET_BIND_TCP, NET_CONNECT_TCP = 1 << 0, 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET, SCOPE_SIGNAL = 1 << 0, 1 << 1

FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
READ_RIGHTS = EXECUTE | READ_FILE | READ_DIR

SYSTEM_READ_PATHS = ("/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc", "/proc", "/sys", "/dev", "/opt")
DEVICE_WRITE_PATHS = ("/dev/null", "/dev/zero", "/dev/urandom", "/dev/random")


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


def _fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: EXECUTE .. MAKE_SYM
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def _libc():
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return libc


def abi_version() -> int:
    """The kernel's Landlock ABI version, or a negative number where Landlock is unavailable."""
    return _libc().syscall(SYS_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(CREATE_RULESET_VERSION))


def restrict(scratch: str, readable: list[str], hidden: list[str] = (), grant: list[str] = (),
             compiled: dict | None = None) -> dict:
    """Apply the rules; return what was applied (for the report header). ``readable`` are the
    Python folders, which stay listable; nothing in a ``hidden`` folder or file (the grader's package,
    the folders submissions were handed in from) can be read, even where it lies inside a readable
    folder, but the files of ``grant``, each alone (its folder stays listable, nothing else in it
    opens: a file written there later included). The files of ``compiled["folder"]`` (the operations
    JAX compiled before) open by name, and the folder is not listed, nor written but where
    ``compiled["write"]``."""
    libc = _libc()
    abi = abi_version()
    if abi < 0:
        return {"applied": False, "reason": f"Landlock is not available ({os.strerror(ctypes.get_errno())})"}
    handled = _fs_rights(abi)
    attr = _RulesetAttr(handled, NET_BIND_TCP | NET_CONNECT_TCP if abi >= 4 else 0,
                        SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if abi >= 6 else 0)
    size = ctypes.sizeof(_RulesetAttr) if abi >= 6 else (16 if abi >= 4 else 8)
    ruleset = libc.syscall(SYS_CREATE_RULESET, ctypes.byref(attr), ctypes.c_size_t(size), ctypes.c_uint32(0))
    if ruleset < 0:
        return {"applied": False, "reason": f"Landlock ruleset refused ({os.strerror(ctypes.get_errno())})"}
    try:
        for path, rights in read_rules(SYSTEM_READ_PATHS, readable, hidden) + grant_rules(grant):
            _allow(libc, ruleset, path, rights & handled)
        for path in DEVICE_WRITE_PATHS:
            _allow(libc, ruleset, path, (READ_FILE | WRITE_FILE) & handled)
        _allow(libc, ruleset, scratch, handled)
        if compiled:
            # read by name alone: JAX opens the entry of an operation's key, and never lists the folder
            _allow(libc, ruleset, compiled["folder"], handled if compiled["write"] is True else READ_FILE & handled)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
            return {"applied": False, "reason": "prctl(PR_SET_NO_NEW_PRIVS) failed"}
        if libc.syscall(SYS_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)) != 0:
            return {"applied": False, "reason": f"Landlock refused ({os.strerror(ctypes.get_errno())})"}
    finally:
        os.close(ruleset)
    return {"applied": True, "abi": int(abi), "network": abi >= 4, "signals": abi >= 6}


def read_rules(system: list[str], readable: list[str], hidden: list[str]) -> list[tuple[str, int]]:
    """(path, rights) granting reads of the ``system`` and ``readable`` folders, except inside the
    ``hidden`` folders. Landlock only adds rights, and a right given to a folder holds for all
    beneath it, so a folder holding a hidden one is not granted as a whole: each of its entries is,
    but the way to the hidden folder (and entries that are links into it), recursively. A Python
    folder on that way stays listable (the import system lists it), which shows the names in it,
    never their contents; a system folder on the way is not. A folder given that lies inside a
    hidden one is granted all the same: the child cannot run without it."""
    hidden_real = {os.path.realpath(path) for path in hidden if path}
    rules: list[tuple[str, int]] = []
    listable = {os.path.realpath(path) for path in readable}
    for root in dict.fromkeys([*system, *readable]):
        real = os.path.realpath(root)
        if real in hidden_real and real not in listable:
            continue
        inside = {h for h in hidden_real if _beneath(h, real)}
        if not inside:
            rules.append((root, READ_RIGHTS))
        else:
            rules.extend(_around(real, inside, real in listable, set()))
    return rules


def grant_rules(files: list[str]) -> list[tuple[str, int]]:
    """(path, rights) for reading each of ``files`` alone, and listing the folder that holds it."""
    rules: list[tuple[str, int]] = []
    folders: set[str] = set()
    for path in files:
        if not path or not os.path.isfile(path):
            continue
        rules.append((path, READ_FILE | EXECUTE))
        folders.add(os.path.dirname(path))
    return rules + [(folder, READ_DIR) for folder in sorted(folders)]


def _around(folder: str, hidden: set[str], listable: bool, visited: set[str]) -> list[tuple[str, int]]:
    """Rules for everything in ``folder`` but the ``hidden`` folders beneath it."""
    if folder in visited:
        return []
    visited.add(folder)
    rules = [(folder, READ_DIR)] if listable else []
    try:
        with os.scandir(folder) as scan:
            entries = [entry.path for entry in scan]
    except OSError:
        return rules
    for path in sorted(entries):
        real = os.path.realpath(path)
        if any(real == h or _beneath(real, h) for h in hidden):
            continue  # hidden itself, or a link into a hidden folder: whatever else is hidden inside it
        deeper = {h for h in hidden if _beneath(h, real)}
        if deeper:
            rules.extend(_around(real, deeper, listable, visited))
        else:
            rules.append((path, READ_RIGHTS))
    return rules


def _beneath(path: str, folder: str) -> bool:
    """``path`` lies strictly inside ``folder`` (both resolved)."""
    return path != folder and path.startswith(folder.rstrip(os.sep) + os.sep)


def _allow(libc, ruleset: int, path: str, rights: int) -> None:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return
    try:
        if not os.path.isdir(path):
            rights &= FILE_RIGHTS
        rule = _PathBeneathAttr(rights, fd)
        libc.syscall(SYS_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(RULE_PATH_BENEATH), ctypes.byref(rule),
                     ctypes.c_uint32(0))
    finally:
        os.close(fd)


def python_paths() -> list[str]:
    """Folders the child must keep reading: the interpreter and its libraries (of the grader's own
    package, only what it is granted file by file)."""
    paths = {sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(os.path.realpath(sys.executable))}
    paths.update(p for p in sys.path if p and os.path.isdir(p))
    return sorted(paths)


def package_folder() -> str:
    """The grader's package folder (which a grading process must reach, to read what it is granted)."""
    import grader

    return os.path.dirname(os.path.realpath(grader.__file__))
