"""JAX's compiled operations, kept between gradings and written only by the grader's own runs.

On JAX, a layer's first call compiles every operation it runs (each shape of it
once), and in a fresh grading process that is most of the grading: about five
seconds of a layer's first call, against well under one when the compiled
operations are loaded from JAX's persistent cache. So gradings on JAX read a
folder of compiled operations (``folder``), one per JAX and jaxlib version,
in the user's cache folder (``GRADE_COMPILED`` names another; ``off`` keeps
none).

A compiled operation is an executable the grading process loads and runs, so
no submission ever writes one: a grading opens the folder's entries by name
(the key of an operation JAX is about to compile), cannot list the folder,
and cannot write in it (Landlock, ``grader.sandbox.landlock``; JAX is told to
write nothing); where the kernel has no Landlock none is kept.
What the folder holds comes from the grader's run of the exercise's own
solution (``prepare``, once per exercise and grader): that run writes into a
staging folder of its own, and the grader moves its entries into the folder
afterwards, each checked (a plain file, a name as JAX writes them, a bounded
size), written anew by the grader itself, and only after the run finished
cleanly. An entry holds no location of the code it was compiled from (no
file, no function it called, no line: ``runtime.use_compiled``), so a grading
that opens one learns nothing of the solution but the operations its own code
asked for. The same computation with the same shapes compiles to the same
executable, so a verdict does not change with what the folder holds; only its
time does. A submission whose operations or shapes differ from the
solution's compiles what it needs, as without the folder.

The folder is readable by the grading's own user alone (the parent folder is
the grader's user's, mode 0700; a grading's mount namespace exposes the
folder where it runs as another user).
"""

from __future__ import annotations

import fcntl
import functools
import hashlib
import importlib.metadata
import os
import re
import shutil
import tempfile
import time
from pathlib import Path

VARIABLE = "GRADE_COMPILED"
BACKENDS = ("jax",)  # the backends whose compiled operations are kept
ENTRY = re.compile(r"[A-Za-z0-9_]{1,160}-[0-9a-f]{16,128}-cache")  # JAX's name for an entry: <module>-<key>-cache
MAX_ENTRY_BYTES = 64 * 1024 * 1024  # one compiled operation (those of an exercise are a few kB each)
MAX_ENTRIES = 2000  # taken from one run (an exercise's solution compiles about 50)
STALE_DAYS = 30  # the folder of other versions, filled by no grading for this long, is removed
FILLED = "filled"  # the folder's record of the exercises whose solution has filled it

_failed: set[tuple[str, str]] = set()  # (folder, stamp) whose run failed in this process: not tried again


def root(environ=os.environ) -> Path | None:
    """Where compiled operations are kept: ``GRADE_COMPILED``, else
    ``$XDG_CACHE_HOME/transformer-exercises/compiled`` (``~/.cache`` by default); None for ``off``."""
    chosen = environ.get(VARIABLE, "").strip()
    if chosen.lower() in ("off", "none", "0"):
        return None
    if chosen:
        return Path(chosen).expanduser().absolute()
    base = environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base).absolute() / "transformer-exercises" / "compiled"


def folder(backend: str, environ=os.environ) -> Path | None:
    """The folder of ``backend``'s compiled operations for the installed versions of its libraries,
    or None where none is kept (another backend, the library missing, ``GRADE_COMPILED=off``)."""
    base = root(environ)
    if backend not in BACKENDS or base is None:
        return None
    try:
        versions = [importlib.metadata.version(name) for name in ("jax", "jaxlib")]
    except importlib.metadata.PackageNotFoundError:
        return None
    return base / ("jax-" + "-".join(re.sub(r"[^0-9A-Za-z.]", "_", v) for v in versions))


def stamp(exercise) -> str:
    """What a filling depends on: the exercise, its solution, the grader's code a grading runs (which
    operations the probes run, with which shapes) and Keras's version; never where any of it lies, so
    a fresh clone of the same grader finds the folder filled. Computed once per process: a grader whose
    code changes is a new process (a server is replaced when its installation changes)."""
    return _stamp(exercise.id)


@functools.cache
def _stamp(exercise_id: str) -> str:
    from .exercises import get
    from .exercises.reads import readable_files

    exercise = get(exercise_id)

    package = Path(__file__).resolve().parent
    digest = hashlib.sha256(exercise.solution.read_bytes())
    try:
        digest.update(importlib.metadata.version("keras").encode())
    except importlib.metadata.PackageNotFoundError:
        pass
    for path in sorted(Path(p).resolve() for p in readable_files() if p.endswith(".py")):
        if package not in path.parents:
            continue  # the libraries': their versions name the folder
        digest.update(path.relative_to(package).as_posix().encode("utf-8", "surrogateescape") + b"\0")
        try:
            digest.update(hashlib.sha256(path.read_bytes()).digest())
        except OSError:
            pass
    return f"{exercise.id}-{digest.hexdigest()[:32]}"


def filled(exercise, backend: str, environ=os.environ) -> bool:
    """Whether the folder for ``backend`` already holds what ``exercise``'s solution compiles (or none
    is kept): a grading then starts at once."""
    target = folder(backend, environ)
    try:
        return target is None or not _enforced() or (target / FILLED / stamp(exercise)).is_file()
    except OSError:  # no solution to fill it from: no folder is kept, nothing to wait for
        return True


def prepare(exercise, backend: str, run_solution, environ=os.environ) -> dict | None:
    """The job's entry for reading ``backend``'s compiled operations (None: none are kept), after
    filling the folder when this grader has not yet for ``exercise`` (under a lock: gradings started
    side by side, in several processes, fill it once). ``run_solution(compiled)`` grades the
    exercise's solution with that job entry and says whether its run finished cleanly."""
    target = folder(backend, environ)
    if target is None or not _enforced():
        return None
    try:
        mark = stamp(exercise)
        if not (target / FILLED / mark).is_file() and (str(target), mark) not in _failed:
            _make(target)
            with open(target.parent / ".lock", "a+b") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                if not (target / FILLED / mark).is_file():
                    if _fill(run_solution, target):
                        (target / FILLED / mark).touch()
                    else:
                        _failed.add((str(target), mark))
    except OSError:
        return None  # an unusable cache folder: the grading compiles what it needs, as without one
    return {"folder": str(target), "write": False}


def _enforced() -> bool:
    """Whether a grading can be kept from writing in the folder: Landlock, where the kernel has it.
    Without it, a grading running as the grader's user could write an executable its classmates'
    gradings would load, so none is kept."""
    from .sandbox.landlock import abi_version

    return abi_version() >= 1


def _make(target: Path) -> None:
    """The root folder the grader's user's alone; the folder of compiled operations inside it."""
    target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(target.parent, 0o700)
    (target / FILLED).mkdir(parents=True, exist_ok=True, mode=0o755)
    os.chmod(target, 0o755)
    stale = time.time() - STALE_DAYS * 86400
    for other in target.parent.iterdir():  # the folders of versions no grading has filled for a month
        if other.name.startswith("jax-") and other != target and other.is_dir() and not other.is_symlink():
            if (other / FILLED).stat().st_mtime < stale if (other / FILLED).is_dir() else True:
                shutil.rmtree(other, ignore_errors=True)


def _fill(run_solution, target: Path) -> bool:
    """Run the exercise's solution with JAX writing what it compiles into a staging folder, then move
    each entry of it into ``target``. Whether the run finished cleanly."""
    staging = Path(tempfile.mkdtemp(prefix=".filling-", dir=target.parent))
    try:
        os.chmod(staging, 0o777)  # the grading's user writes there; the folder above is the grader's user's alone
        try:
            clean = run_solution({"folder": str(staging), "write": True})
        except Exception:  # noqa: BLE001 - the grader's own run: the grading goes on without it
            clean = False
        if clean:
            take(staging, target)
        return clean
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def take(staging: Path, target: Path) -> int:
    """Copy the entries of ``staging`` a run wrote into ``target``, each checked and written anew by
    this process (readable, never writable, by the gradings); how many were new."""
    taken = 0
    with os.scandir(staging) as entries:
        for entry in entries:
            if taken >= MAX_ENTRIES:
                break
            if not ENTRY.fullmatch(entry.name) or not entry.is_file(follow_symlinks=False):
                continue
            destination = target / entry.name
            if destination.exists():
                continue
            try:
                handle = os.open(entry.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
            except OSError:
                continue
            with os.fdopen(handle, "rb") as source:
                data = source.read(MAX_ENTRY_BYTES + 1)
            if not data or len(data) > MAX_ENTRY_BYTES:
                continue
            written, temporary = tempfile.mkstemp(dir=target, prefix=".new-")
            try:
                with os.fdopen(written, "wb") as out:
                    out.write(data)
                os.chmod(temporary, 0o644)
                os.replace(temporary, destination)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
            taken += 1
    return taken
