"""Evidence recorded once and judged again: the catalogue in seconds when only the checks change.

A grading has two stages: a child runs the submission and sends evidence, then
a judge runs the checks over it (``grader.api``). What the child sends is
fixed by the submission's bytes, the job and the secrets the parent chose, the
code that runs beside the submission and the libraries it imports. So the
suite records each catalogued submission's evidence once, through the batch's
warm worker, and keeps the recording between runs, keyed by all of that; a
run whose key matches replays the recording instead of starting a child, and
the judge (the checks, the replay, the references) runs in full every time.
The test processes of one run share the recording out (``Claims``): each
submission is recorded by one of them and replayed by the others.

The recordings live outside the clone (``evidence_folder``: ``GRADE_EVIDENCE_CACHE``, else the
user's cache folder), keyed by content alone — never by a path or the interpreter's location — so a
fresh clone, a worktree or a copy of the project elsewhere on the machine replays what another
recorded; the seed they were recorded with is kept beside them.

A replay is not trusted blindly: its records go through the grader's own
record parser again, and the parent's answer to the child's report of the
layer (the secret inputs and weights, drawn from the seed) must be, byte for
byte, the answer the recorded child received. A replay that differs is never
judged: the recording is dropped and the grading is an error that says so.

Only clean runs are kept: ones that finished, within their time and memory,
with well-formed evidence. A timeout or an out-of-memory ending depends on the
machine's load, not the submission alone.
"""

from __future__ import annotations

import base64
import fcntl
import gzip
import hashlib
import importlib.metadata
import json
import os
import platform
import select
import sys
import tempfile
import time
from pathlib import Path

import grader
from grader.sandbox import process as sandbox
from grader.protocol import wire
from grader.sandbox.evidence import ChildRun, RecordParser

FORMAT = 2  # bumped whenever what a recording holds, or how it is keyed, changes
SUFFIX = ".evidence.gz"
SEED_FILE = "seed"
KEEP_DAYS = 30  # a recording no run has used for this long is removed
MAX_RECORDINGS = 4000  # and beyond this many, the least recently used (a catalogue is about 200)


def evidence_folder(environ=os.environ) -> Path | None:
    """Where recordings are kept: ``GRADE_EVIDENCE_CACHE`` (``off``: nowhere, each run records
    afresh), else ``$XDG_CACHE_HOME/transformer-exercises/evidence`` (``~/.cache`` by default)."""
    chosen = environ.get("GRADE_EVIDENCE_CACHE", "").strip()
    if chosen.lower() in ("off", "none", "0"):
        return None
    if chosen:
        return Path(chosen).expanduser()
    base = environ.get("XDG_CACHE_HOME", "").strip() or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "transformer-exercises" / "evidence"


def kept_seed(folder: Path) -> int | None:
    """The seed the recordings in ``folder`` were made with, if one is kept there."""
    try:
        text = (Path(folder) / SEED_FILE).read_text(encoding="ascii").strip()
    except (OSError, UnicodeDecodeError):
        return None
    return int(text) if text.isdigit() else None


def keep_seed(folder: Path, seed: int) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=folder, suffix=".tmp")
    with os.fdopen(handle, "w", encoding="ascii") as out:
        out.write(f"{int(seed)}\n")
    os.replace(temporary, folder / SEED_FILE)


PACKAGE = Path(grader.__file__).resolve().parent


def package_files(package: Path = PACKAGE, files=None) -> list[Path]:
    """The grader's files a grading process runs — the source of every module it may read
    (``grader.exercises.reads``; ``files``, relative to ``package``, instead) — which is all of the
    grader's code its evidence can depend on: the checks, the judge and the references run again, in
    the judge, on every replay, and what shapes the job is in the key itself."""
    package = Path(package).resolve()
    if files is None:
        from grader.exercises.reads import readable_files

        chosen = [Path(path) for path in readable_files() if path.endswith(".py")]
    else:
        chosen = [package / path for path in files]
    return sorted({path.resolve() for path in chosen if path.is_file()})


def environment_digest(package: Path = PACKAGE, files=None) -> str:
    """What a recording depends on besides the submission and its job: the grader's code on the
    grading process's side (the child, the sandbox, the inputs the parent chooses, the wire
    format), the interpreter, and the version of every installed distribution (TensorFlow, Keras,
    NumPy and all they bring)."""
    digest = hashlib.sha256(f"format {FORMAT}\n".encode())
    package = Path(package).resolve()
    for path in package_files(package, files):
        digest.update(path.relative_to(package).as_posix().encode("utf-8", "surrogateescape") + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    # the interpreter's version and the machine, never where either is installed
    digest.update(f"{sys.implementation.name}\0{sys.version}\0{platform.platform()}\0".encode())
    versions = sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions()
                      if d.metadata["Name"])
    digest.update("\n".join(versions).encode())
    return digest.hexdigest()


class EvidenceCache:
    """Recordings in one folder, one file per key. ``used`` are the keys this run read or wrote.
    ``places`` maps folders to the names they stand for in a key (the submissions' folder, say):
    with the project's own folder, they are written as those names, so the same grading keys alike
    wherever the clone and the submissions lie."""

    def __init__(self, folder: Path, seed: int, places: dict | None = None, refresh: bool | float = False):
        """``refresh``: record every grading again, replacing what is kept under its key — True, or the
        time (seconds since the epoch) a refreshing run began, so the recordings its other test
        processes have made since are replayed, not made again."""
        self.refresh = (time.time() if refresh is True else float(refresh)) if refresh else None
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.seed = seed
        self.environment = environment_digest()
        roots = {str(PACKAGE.parent): "<project>", **{str(k): str(v) for k, v in (places or {}).items()}}
        # the longest first, each as given and resolved
        pairs = {os.path.realpath(path): name for path, name in roots.items()} | roots
        self._places = sorted(pairs.items(), key=lambda pair: -len(pair[0]))
        self.used: set[str] = set()
        self.hits = 0
        self.recorded = 0

    def key(self, job: dict, source: str, timeout: float, memory_mb: int) -> str:
        """The recording's name: every input of a grading process, and what it runs on."""
        inputs = {"job": job, "source": source, "timeout": float(timeout), "memory_mb": int(memory_mb),
                  "limits": sandbox.limits(timeout, memory_mb, job.get("private", ()), job.get("reads")),
                  "seed": self.seed, "environment": self.environment}
        return hashlib.sha256(json.dumps(self._portable(inputs), sort_keys=True, default=str).encode()).hexdigest()

    def _portable(self, value):
        """``value`` with every path inside a known folder written as that folder's name."""
        if isinstance(value, dict):
            return {key: self._portable(item) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return [self._portable(item) for item in value]
        if isinstance(value, str):
            for path, name in self._places:
                if value == path or value.startswith(path.rstrip(os.sep) + os.sep):
                    return name + value[len(path.rstrip(os.sep)):]
        return value

    def _path(self, key: str) -> Path:
        return self.folder / f"{key}{SUFFIX}"

    def load(self, key: str) -> dict | None:
        """The recording kept under ``key``, or None: none, of another format, or not the bytes
        that were written (a file cut short or edited since is recorded again)."""
        try:
            with gzip.open(self._path(key), "rt", encoding="utf-8") as handle:
                kept = json.load(handle)
        except (OSError, ValueError, EOFError):
            return None
        if not isinstance(kept, dict) or kept.get("format") != FORMAT or not isinstance(kept.get("recording"), dict):
            return None
        if kept.get("digest") != _digest(key, kept["recording"]):
            return None
        recorded_at = kept.get("recorded_at")
        if self.refresh is not None and not (isinstance(recorded_at, (int, float)) and recorded_at >= self.refresh):
            return None
        try:
            os.utime(self._path(key))  # used now: pruning removes the least recently used
        except OSError:
            pass
        return kept["recording"]

    def store(self, key: str, recording: dict) -> None:
        """Write atomically: a run stopped half way, or two runs at once, leave no torn file."""
        handle, temporary = tempfile.mkstemp(dir=self.folder, suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as packed:
                packed.write(json.dumps({"format": FORMAT, "digest": _digest(key, recording),
                                         "recorded_at": time.time(), "recording": recording}).encode("utf-8"))
            os.replace(temporary, self._path(key))
        except BaseException:
            Path(temporary).unlink(missing_ok=True)
            raise
        self.used.add(key)
        self.recorded += 1

    def drop(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)
        self.used.discard(key)

    def prune(self, everything_unused: bool = False) -> int:
        """Remove the recordings nobody needs any more: those no run has used for KEEP_DAYS (older code,
        submissions edited since), then the least recently used beyond MAX_RECORDINGS; with
        ``everything_unused``, every one this run did not use. Other clones and worktrees share the
        folder, so a run keeps what it did not use but another may. The number removed."""
        found = []
        for path in self.folder.glob(f"*{SUFFIX}"):
            try:
                found.append((path.stat().st_mtime, path))
            except OSError:
                continue
        found.sort(reverse=True)  # the most recently used first
        cutoff = time.time() - KEEP_DAYS * 86400
        removed = 0
        for rank, (used_at, path) in enumerate(found):
            key = path.name[:-len(SUFFIX)]
            if key in self.used:
                continue
            if everything_unused or used_at < cutoff or rank >= MAX_RECORDINGS:
                path.unlink(missing_ok=True)
                removed += 1
        return removed


def _digest(key: str, recording: dict) -> str:
    return hashlib.sha256(key.encode() + b"\0" + json.dumps(recording, sort_keys=True).encode()).hexdigest()


class StaleRecording(RuntimeError):
    """A replay whose parent side no longer matches what the recorded child received."""


class Recorder:
    """A grading runner (``runner(job, source, timeout, memory_mb, respond=...)``, as
    ``grader.api.Grading`` takes one) that replays a recording when the cache has one and
    otherwise runs the child through ``start()`` (the batch's warm worker, made on first need)
    and records it."""

    def __init__(self, cache: EvidenceCache, start):
        self.cache = cache
        self._start = start
        self._runner = None

    def __call__(self, job: dict, source: str, timeout: float, memory_mb: int, respond=None):
        key = self.cache.key(job, source, timeout, memory_mb)
        recording = self.cache.load(key)
        if recording is not None:
            try:
                run = replay(recording, respond)
            except StaleRecording:
                self.cache.drop(key)
                raise
            self.cache.used.add(key)
            self.cache.hits += 1
            return Replayed(run)
        if self._runner is None:
            self._runner = self._start()
        log: list[tuple[bytes, bytes | None]] = []

        def respond_and_log(record: dict):
            answer = respond(record) if respond is not None else None
            log.append((wire.dumps(record), answer))
            return answer

        return Recording(self._runner(job, source, timeout, memory_mb, respond=respond_and_log), log,
                         lambda recording: self.cache.store(key, recording))

    @property
    def started(self):
        """The runner children were started with, if any child was needed."""
        return self._runner


END_FIELDS = ("finished", "timed_out", "memory_exceeded", "returncode", "signal_name", "stdout", "stderr",
              "seconds")


def clean(run: ChildRun) -> bool:
    """A run worth keeping: finished, within its limits, its evidence well formed."""
    return run.finished and not (run.timed_out or run.memory_exceeded or run.protocol_error)


class Recording:
    """A running child whose evidence is kept once it ends: everything ``Grading`` asks of a
    child is passed to it."""

    def __init__(self, child, log: list, store):
        self._child = child
        self._log = log
        self._store = store
        self._kept = False

    def __getattr__(self, name):
        return getattr(self._child, name)

    def wait(self) -> ChildRun:
        run = self._child.wait()
        if not self._kept and clean(run):
            self._kept = True
            self._store({
                "records": [line.decode("utf-8") for line, _ in self._log],
                "answers": {str(i): base64.b64encode(answer).decode("ascii")
                            for i, (_, answer) in enumerate(self._log) if answer is not None},
                "end": {name: getattr(run, name) for name in END_FIELDS},
            })
        return run


def replay(recording: dict, respond) -> ChildRun:
    """The ChildRun the recording's child gave, its records read again by the grader's own parser
    and answered again by ``respond``; raises StaleRecording if an answer differs from the one the
    recorded child received."""
    answers = {int(i): base64.b64decode(a) for i, a in recording.get("answers", {}).items()}
    seen = [0]

    def check_answer(record: dict):
        index = seen[0]
        seen[0] += 1
        answer = respond(record) if respond is not None else None
        if answer != answers.get(index):
            raise StaleRecording("the parent's answer to the recorded child differs from the one it received")
        return None  # nobody to send it to

    run = ChildRun()
    parser = RecordParser(run, check_answer)
    for line in recording["records"]:
        parser.feed(line.encode("utf-8"))
    parser.finish()
    if seen[0] != len(recording["records"]) or run.protocol_error:
        raise StaleRecording(f"the recorded evidence no longer reads as the grader expects ({run.protocol_error})")
    for name, value in recording["end"].items():
        if name in END_FIELDS:
            setattr(run, name, value)
    if not clean(run):
        raise StaleRecording("the recording is not of a clean run")
    return run


class Replayed:
    """A child that has already ended: its run is the recording's."""

    def __init__(self, run: ChildRun):
        self._run = run

    def ready(self) -> bool:
        return True

    def seconds_left(self) -> float:
        return 0.0

    def wait(self) -> ChildRun:
        return self._run

    def kill(self) -> None:
        pass


class Claims:
    """Work that the test processes of one run share out: each item is graded by whichever process
    claims it first, and a process that finds an item claimed grades others meanwhile, then takes
    the item once its claim ends (its recording is then replayed, not made again). A claim is an
    exclusive ``flock`` on a file of its own in ``folder``, so the kernel ends it with its holder,
    however that ends: a process that dies leaves nothing claimed."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._held: dict[str, int] = {}

    def _file(self, name: str) -> Path:
        return self.folder / (hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:32] + ".claim")

    def take(self, name: str, wait: bool = False) -> bool:
        """Claim ``name``: True once this process holds it; False at once if another does and not ``wait``."""
        if name in self._held:
            return True
        handle = os.open(self._file(name), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(handle)
            return False
        except BaseException:
            os.close(handle)
            raise
        self._held[name] = handle
        return True

    def release(self, name: str) -> None:
        handle = self._held.pop(name, None)
        if handle is not None:
            os.close(handle)  # closing the only descriptor ends the flock

    def release_all(self) -> None:
        for name in list(self._held):
            self.release(name)


CLAIM_LOOK = 0.5  # seconds between looks at the claims of another process, while this one grades


def grade_all(gradings_of, items, jobs: int, claims: Claims | None = None, name=str):
    """Yield (item, verdict) for every item, in the order they finish, with up to ``jobs`` gradings
    going at once: a child or a judge of each, whichever stage it is in. ``gradings_of(item)``
    starts one grading (``grader.api.Grading``). With ``claims``, each grading starts only once this
    process has claimed its item (``name(item)``), and ends its claim as it ends: the items another
    process holds wait until it lets them go, while this one grades the rest."""
    queue = list(items)
    pending: list = []
    try:
        while queue or pending:
            while queue and len(pending) < max(1, jobs):
                index = _claim(queue, claims, name, wait=not pending)
                if index is None:
                    break  # every item left is another process's for now: look again soon
                item = queue.pop(index)
                pending.append((item, gradings_of(item)))
            index = _next_ready([grading for _, grading in pending],
                                CLAIM_LOOK if queue and len(pending) < max(1, jobs) else None)
            if index is None:
                continue
            item, grading = pending[index]
            if not grading.advance():
                continue  # its judge has started: waited for like a child
            pending.pop(index)
            verdict = grading.finish()
            if claims is not None:
                claims.release(name(item))
            yield item, verdict
    finally:
        for _, grading in pending:
            grading.close()
        if claims is not None:
            claims.release_all()


def _claim(queue: list, claims: Claims | None, name, wait: bool) -> int | None:
    """The index of the first item in ``queue`` this process now holds; with ``wait``, waiting for
    the first item's claim if another process holds every one."""
    if claims is None:
        return 0
    for index, item in enumerate(queue):
        if claims.take(name(item)):
            return index
    if wait:
        claims.take(name(queue[0]), wait=True)
        return 0
    return None


def _next_ready(gradings, most: float | None = None) -> int | None:
    """The index of a grading ready to advance; None once ``most`` seconds have passed without one."""
    deadline = None if most is None else time.monotonic() + most
    while True:
        for index, grading in enumerate(gradings):
            if grading.ready() or grading.sentinel is None:
                return index
        look = min(g.next_look() for g in gradings)
        if deadline is not None:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            look = min(look, left)
        poller = select.poll()
        for grading in gradings:
            poller.register(grading.sentinel, select.POLLIN)
        poller.poll(int(look * 1000) + 10)
