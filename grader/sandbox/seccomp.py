"""A seccomp filter for the grading child: no sockets, no new namespaces, no reaching other processes.

Installed once, before the student's code loads, on every thread of the child
and inherited by everything it starts. Refused calls fail with an errno (the
student's code sees a ``PermissionError``), never by killing the process:

- ``socket()`` of every family: no TCP, UDP, raw, netlink, nor pathname or
  abstract unix socket, so no message leaves the child whatever network the
  machine has. (``socketpair()``, a connected pair inside the child, stays.)
- io_uring, which could open sockets without the ``socket`` call;
- ptrace, process_vm_readv/writev and pidfd_getfd: no reading or writing
  another process;
- new namespaces (unshare, setns, clone with a namespace flag; clone3 answers
  ENOSYS so the C library falls back to clone, whose flags the filter can read),
  mounts, and the kernel keyrings, SysV and POSIX message queues, perf, bpf,
  userfaultfd;
- memfd_create and memfd_secret: memory held by a file with no path is counted
  in no process's address space, so it would escape the memory limit;
- setsid: a new session is a new group for the kernel's CPU sharing, so a
  grading could take a share of the CPU for each process it starts.

Calls of the other ABI on the same machine (x32, 32-bit) are refused too. The
filter is built for x86_64 and aarch64; elsewhere ``install`` says it was not
applied.
"""

from __future__ import annotations

import ctypes
import errno
import os

from . import kernel

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000

# the calls refused, by name, with the errno they fail with
REFUSED = {
    "socket": errno.EACCES,
    "io_uring_setup": errno.EPERM, "io_uring_enter": errno.EPERM, "io_uring_register": errno.EPERM,
    "ptrace": errno.EPERM, "process_vm_readv": errno.EPERM, "process_vm_writev": errno.EPERM,
    "pidfd_getfd": errno.EPERM,
    "unshare": errno.EPERM, "setns": errno.EPERM, "clone3": errno.ENOSYS,
    "mount": errno.EPERM, "umount2": errno.EPERM, "pivot_root": errno.EPERM, "chroot": errno.EPERM,
    "open_tree": errno.EPERM, "move_mount": errno.EPERM, "fsopen": errno.EPERM, "fsconfig": errno.EPERM,
    "fsmount": errno.EPERM, "fspick": errno.EPERM, "mount_setattr": errno.EPERM,
    "add_key": errno.EPERM, "request_key": errno.EPERM, "keyctl": errno.EPERM,
    "msgget": errno.EPERM, "semget": errno.EPERM, "shmget": errno.EPERM, "mq_open": errno.EPERM,
    "perf_event_open": errno.EPERM, "bpf": errno.EPERM, "userfaultfd": errno.EPERM,
    "memfd_create": errno.EPERM, "memfd_secret": errno.EPERM, "setsid": errno.EPERM,
}

SYSCALLS = {
    "x86_64": {
        "socket": 41, "clone": 56, "ptrace": 101, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438,
        "unshare": 272, "setns": 308, "clone3": 435, "mount": 165, "umount2": 166, "pivot_root": 155,
        "chroot": 161, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432,
        "fspick": 433, "mount_setattr": 442, "add_key": 248, "request_key": 249, "keyctl": 250, "msgget": 68,
        "semget": 64, "shmget": 29, "mq_open": 240, "perf_event_open": 298, "bpf": 321, "userfaultfd": 323,
        "memfd_create": 319, "memfd_secret": 447, "setsid": 112,
    },
    "aarch64": {
        "socket": 198, "clone": 220, "ptrace": 117, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_getfd": 438,
        "unshare": 97, "setns": 268, "clone3": 435, "mount": 40, "umount2": 39, "pivot_root": 41, "chroot": 51,
        "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431, "fsmount": 432, "fspick": 433,
        "mount_setattr": 442, "add_key": 217, "request_key": 218, "keyctl": 219, "msgget": 186, "semget": 190,
        "shmget": 194, "mq_open": 180, "perf_event_open": 241, "bpf": 280, "userfaultfd": 282,
        "memfd_create": 279, "memfd_secret": 447, "setsid": 157,
    },
}

# classic BPF
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
RET_KILL_PROCESS = 0x80000000
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (arg0's low 32 bits, little-endian)

SECCOMP_SET_MODE_FILTER = 1
SECCOMP_FILTER_FLAG_TSYNC = 1
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


class _Instruction(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint16), ("jt", ctypes.c_uint8), ("jf", ctypes.c_uint8), ("k", ctypes.c_uint32)]


class _Program(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(_Instruction))]


def program(machine: str) -> list[tuple[int, int, int, int]]:
    """The filter as (code, jt, jf, k) instructions for ``machine``."""
    numbers = SYSCALLS[machine]
    code = [
        (_LD_W_ABS, 0, 0, _ARCH),
        (_JEQ_K, 1, 0, AUDIT_ARCH[machine]),
        (_RET_K, 0, 0, RET_ERRNO | errno.ENOSYS),  # another ABI: nothing of it is allowed
        (_LD_W_ABS, 0, 0, _NR),
    ]
    if machine == "x86_64":
        code += [(_JGE_K, 0, 1, X32_SYSCALL_BIT), (_RET_K, 0, 0, RET_ERRNO | errno.ENOSYS)]
    for name, refusal in REFUSED.items():
        code += [(_JEQ_K, 0, 1, numbers[name]), (_RET_K, 0, 0, RET_ERRNO | refusal)]
    code += [
        (_JEQ_K, 0, 3, numbers["clone"]),
        (_LD_W_ABS, 0, 0, _ARG0),
        (_JSET_K, 0, 1, kernel.NAMESPACE_FLAGS),
        (_RET_K, 0, 0, RET_ERRNO | errno.EPERM),
        (_RET_K, 0, 0, RET_ALLOW),
    ]
    return code


def install() -> dict:
    """Install the filter on every thread of this process; say what was applied."""
    machine = kernel.MACHINE
    if machine not in SYSCALLS:
        return {"applied": False, "reason": f"no seccomp filter for {machine}"}
    instructions = program(machine)
    array = (_Instruction * len(instructions))(*[_Instruction(*i) for i in instructions])
    prog = _Program(len(instructions), array)
    try:
        kernel.prctl(kernel.PR_SET_NO_NEW_PRIVS, 1)
    except OSError as exc:
        return {"applied": False, "reason": str(exc)}
    libc = kernel.libc()
    result = libc.syscall(ctypes.c_long(kernel.seccomp_syscall_number()), ctypes.c_uint(SECCOMP_SET_MODE_FILTER),
                          ctypes.c_uint(SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(prog))
    if result != 0:
        error = ctypes.get_errno()
        if result > 0:  # TSYNC names the thread that could not be synchronised
            return {"applied": False, "reason": f"seccomp could not cover thread {result}"}
        return {"applied": False, "reason": f"seccomp refused ({os.strerror(error)})"}
    return {"applied": True, "refused": sorted(name for name in REFUSED if name != "clone3")
            + ["clone with a namespace flag"]}
