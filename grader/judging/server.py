"""The judge server: ``python -I -m grader.judging.server SOCKET_FD GRADER_PID``.

It imports NumPy, autograd, pytest and every exercise's checks once, then forks
one judge per request (the loop is the batch worker's, ``grader.sandbox.forkloop``).
A request carries two descriptors, the read end of the judge's request pipe and
the write end of its answer pipe, and the judge's limits. The judge keeps only
those two, sets its limits (address space, CPU time), reads the request, judges
it (``judgment``), writes the answer and exits. The server keeps none of a
judge's descriptors, never waits on a judge, and dies with the grader.
"""

from __future__ import annotations

import os
import resource

DESCRIPTORS = 2


def main() -> None:
    from ..sandbox.forkloop import serve_forever, start_server

    channel = start_server()
    if channel is None:
        return
    preload()
    serve_forever(channel, DESCRIPTORS, limits_of, run_judge)


def preload() -> None:
    """Everything a judge imports, imported once in the server: pytest's own plugins and what they
    import when a session starts (each judge would otherwise import them anew, a third of its time)."""
    import importlib

    import autograd.numpy  # noqa: F401
    import numpy  # noqa: F401
    import pytest  # noqa: F401
    from _pytest import config

    for name in [*(f"_pytest.{p}" for p in getattr(config, "default_plugins", ())),
                 "_pytest._argcomplete", "faulthandler", "pdb", "readline"]:
        try:
            importlib.import_module(name)
        except ImportError:  # another pytest's plugins: the judge imports what it needs itself
            pass

    from .. import exercises
    from ..judge import evidence, reference, replay
    from . import plugin  # noqa: F401

    for exercise in exercises.EXERCISES.values():
        importlib.import_module(exercise.checks_module)
    from . import judgment  # noqa: F401


def limits_of(request) -> dict:
    limits = request.get("limits") if isinstance(request, dict) else None
    if not isinstance(limits, dict):
        raise ValueError("a request needs the judge's limits")
    memory, cpu = limits.get("memory_bytes"), limits.get("cpu_seconds")
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in (memory, cpu)):
        raise ValueError("a judge's limits are positive whole numbers")
    groups = limits.get("cgroups", [])
    if not isinstance(groups, list) or not all(isinstance(g, str) and g.endswith("/cgroup.procs") for g in groups):
        raise ValueError("a judge's control groups are the cgroup.procs files it joins")
    return {"memory_bytes": memory, "cpu_seconds": cpu, "cgroups": groups}


def run_judge(descriptors: list[int], limits: dict) -> None:
    """A judge (in the fork): never returns."""
    from ..protocol.limits import MAX_REQUEST_BYTES
    from ..sandbox.pipes import write_all
    from .judgment import judge_request
    from .exchange import answer, encode

    request_fd, answer_fd = descriptors
    code = 70
    try:
        for procs in limits["cgroups"]:  # its own group, before it reads anything
            with open(procs, "w", encoding="ascii") as group:
                group.write(str(os.getpid()))
        resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu_seconds"], limits["cpu_seconds"] + 5))
        resource.setrlimit(resource.RLIMIT_AS, (limits["memory_bytes"], limits["memory_bytes"]))
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        data = _read_all(request_fd, MAX_REQUEST_BYTES)
        os.close(request_fd)
        if data is None:
            judged = answer(failed=f"the grader's judge was given more than the {MAX_REQUEST_BYTES:,} bytes "
                                   "of evidence it reads")
        else:
            judged = judge_request(data)
        del data
        usage = resource.getrusage(resource.RUSAGE_SELF)
        write_all(answer_fd, encode(judged, round(usage.ru_maxrss / 1024, 1),
                                     round(usage.ru_utime + usage.ru_stime, 3)))
        code = 0
    except MemoryError:
        try:
            write_all(answer_fd, encode(answer(out_of_memory=True)))
            code = 0
        except BaseException:  # noqa: BLE001 - the grader sees an answer missing and says so
            pass
    finally:
        os._exit(code)


def _read_all(fd: int, limit: int) -> bytes | None:
    """Everything on ``fd``, or None once it is more than ``limit`` bytes."""
    chunks, total = [], 0
    while True:
        block = os.read(fd, 1 << 20)
        if not block:
            return b"".join(chunks)
        total += len(block)
        if total > limit:
            return None
        chunks.append(block)


if __name__ == "__main__":
    main()
