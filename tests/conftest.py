"""Shared fixtures: grading many submissions at once, with children running in parallel, and the
catalogue graded once per run from evidence recorded once per change."""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from grader.api import Grading, Settings, grade_pairs
# the batch's own worker class, taken before any test stands SharedWorkers in for it
from grader.workers import Workers as _Workers

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# Every `grade` of the suite grades cold, in this process and in the commands it runs, and leaves no
# grading server behind: the tests of the server (tests/test_server.py) turn it on for themselves,
# with a runtime folder of their own, and stop each server they start.
os.environ["GRADE_SERVER"] = "off"
# Rich reads the terminal's width from COLUMNS (and a captured output has no terminal): every
# report a test reads is rendered at this width, whatever the terminal running the suite. Tests
# of narrower or wider renderings give their Console a width of its own.
os.environ["COLUMNS"] = "100"
os.environ.pop("LINES", None)

JOBS = max(1, min(3, os.cpu_count() or 1))
WARM_JOBS = 2 * JOBS  # forked gradings wait part of their time for the grader: more of them keep the cores busy


_warm = None


def warm_runner():
    """This run's grading worker (``grader.workers.Workers``: TensorFlow imported once, a child forked
    per grading, as ``grade batch`` grades a class), started on first use and ended with the run.
    tests/test_batch.py shows its verdicts equal a fresh grading process's; the tests that are
    about the fresh process itself (``grade``, the command) keep starting one."""
    global _warm
    if _warm is None:
        _warm = _Workers()
    return _warm


def pytest_sessionfinish(session):
    global _warm
    if _warm is not None:
        _warm.close()
        _warm = None


class SharedWorkers:
    """Stands in for ``grader.workers.Workers`` where a test runs ``grade batch`` in this process many
    times and is not about the worker: every run forks from this run's worker, which outlives them."""

    def __init__(self, *_args, **_kwargs):
        self._workers = warm_runner()

    def __call__(self, *args, **kwargs):
        return self._workers(*args, **kwargs)

    @property
    def pid(self):
        return self._workers.pid

    def close(self) -> None:
        pass  # ended with the run


class ExpireAt:
    """A runner whose children's clocks run out the moment a child starts ``phase`` (and ``ready()``,
    if given, is true; otherwise as soon as it is): the verdict of a time limit reached right there,
    without waiting for one to expire on the wall clock. ``runner`` starts the children; only those
    of the submissions whose text is one of ``sources`` are ended (all, if None)."""

    def __init__(self, runner, phase: str, ready=None, sources=None):
        self.runner, self.phase, self.ready = runner, phase, ready
        self.sources = None if sources is None else set(sources)
        self.waiting: list = []  # children in ``phase`` that ``ready()`` still holds back
        self._lock = threading.Lock()

    def __call__(self, job, source, timeout, memory_mb, respond=None):
        if self.sources is not None and source not in self.sources:
            return self.runner(job, source, timeout, memory_mb, respond=respond)
        seen, holder = [], []

        def watch(record):
            if record.get("event") == "start" and record.get("phase") == self.phase:
                seen.append(True)
                self._reached(holder)
            return respond(record) if respond is not None else None

        holder.append(self.runner(job, source, timeout, memory_mb, respond=watch))
        if seen:
            self._reached(holder)
        return holder[0]

    def _reached(self, holder) -> None:
        with self._lock:
            if holder and holder[0] not in self.waiting:
                self.waiting.append(holder[0])
        self.release()

    def release(self) -> None:
        """Run out the clock of every child that has reached the phase, once ``ready()`` allows."""
        if self.ready is not None and not self.ready():
            return
        with self._lock:
            waiting, self.waiting = self.waiting, []
        for child in waiting:
            child.expire()

    def __getattr__(self, name):  # pid, close, ... of a worker runner
        return getattr(self.runner, name)


def grade_many(exercise_id: str, submissions, settings: Settings = Settings(), jobs: int = 2, runner=None):
    """Yield (submission, verdict) in order, with up to ``jobs`` gradings going at once (each in a fresh
    grading process, or started by ``runner``)."""
    from grader.sandbox.process import Child

    for _, path, verdict in grade_pairs([(exercise_id, s) for s in submissions], settings, jobs, runner or Child):
        yield path, verdict


def grade_warm(exercise_id: str, submission: Path, settings: Settings = Settings()):
    """One grading, its child forked from this run's worker: ``grade`` without the import of TensorFlow."""
    return Grading(exercise_id, submission, settings, runner=warm_runner()).finish()


def grade_sources(exercise_id: str, sources: dict[str, str], folder: Path, settings: Settings = Settings(),
                  warm: bool = False):
    """Write each source to ``folder/<name>.py`` and grade them all; {name: Verdict}. Each in a fresh
    grading process, as ``grade`` runs one, or with ``warm`` forked from this run's worker."""
    paths = {}
    folder.mkdir(parents=True, exist_ok=True)
    for name, source in sources.items():
        path = folder / f"{name}.py"
        path.write_text(source, encoding="utf-8")
        paths[path.resolve()] = name
    if warm:
        verdicts = grade_many(exercise_id, list(paths), settings, jobs=WARM_JOBS, runner=warm_runner())
    else:
        verdicts = grade_many(exercise_id, list(paths), settings, jobs=JOBS)
    return {paths[path]: verdict for path, verdict in verdicts}


# The parts of the suite a marker selects (registered in pyproject.toml), put on whole files here
# and on single tests where they stand: `-m sandbox` runs the confinement's tests alone.
MARKERS = {
    "test_containment.py": ("sandbox",),
    "test_hostile_submissions.py": ("sandbox",),
    "test_hidden_folders.py": ("sandbox",),
    "test_forged_evidence.py": ("sandbox",),
    "test_protocol.py": ("sandbox",),
    "test_robustness.py": ("sandbox",),
    "test_replay_budget.py": ("sandbox",),
    "test_nbgrader_course.py": ("nbgrader",),
    "test_install.py": ("slow",),
}

# Two tiers. The default one is what `python -m pytest` runs (the README's command): everything a
# change can break, every entry point through at least one real cold grading, in minutes. The slow
# tier (`-m slow`, tests marked slow where they stand) is the exhaustive rest: every catalogue on
# every backend, every hostile file through a fresh `grade`, whole nbgrader courses. Naming files or
# tests, or giving -m, selects as pytest does; only a bare run is cut to the default tier.
DEFAULT_TIER = "not slow"


MAX_TEST_PROCESSES = 4  # each holds a grading worker and up to WARM_JOBS gradings in memory
# Fixtures wider than one test that every test process may set up for itself, since what is costly in
# them is shared between the processes of a run: the catalogue's gradings, each recorded by whichever
# process claims it first and replayed by the others (tests/recorded.py's Claims and EvidenceCache); or
# since a process's own copy costs less than running the tests that use it one after the other: a warm
# worker of another backend, for that backend's catalogues.
SHARED_BETWEEN_PROCESSES = frozenset({"tests.conftest.catalog_verdicts", "tests.conftest.catalog_requests",
                                      "tests.test_backends.backend_workers"})


def shared_units(items, apart=SHARED_BETWEEN_PROCESSES) -> dict[str, str]:
    """{test: its unit of work} for the tests that share a fixture of the suite wider than one test
    (a hostile class graded once per module, a private Slurm): tests sharing one, directly or
    through another test, are one unit, named after one of its fixtures, so a run of several test
    processes sets each such fixture up once. A test that shares none (the fixtures in ``apart``
    left out) is not listed: it is a unit of its own."""
    parent: dict[str, str] = {}

    def find(key: str) -> str:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    shared = {}
    for item in items:
        info = getattr(item, "_fixtureinfo", None)
        wide = (f"{definitions[-1].func.__module__}.{name}"
                for name, definitions in (info.name2fixturedefs.items() if info else ())
                if definitions and definitions[-1].scope != "function"
                and getattr(definitions[-1].func, "__module__", "").startswith("tests."))
        keys = sorted(key for key in wide if key not in apart)
        if keys:
            shared[item.nodeid] = keys
            for key in keys[1:]:
                parent[find(key)] = find(keys[0])
    return {nodeid: find(keys[0]) for nodeid, keys in shared.items()}


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        for name in MARKERS.get(item.path.name, ()):
            item.add_marker(name)
    folder = getattr(config, "workerinput", {}).get("run_folder")
    if folder:  # a test process of pytest-xdist: its units of work, for the scheduler (SharedTogether)
        path = Path(folder) / "units" / f"{config.workerinput['workerid']}.json"
        path.parent.mkdir(exist_ok=True)
        path.with_suffix(".part").write_text(json.dumps(shared_units(items)), encoding="utf-8")
        path.with_suffix(".part").replace(path)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """What ``-n auto`` (the suite's default) means: one test process per CPU this run may use, at most
    MAX_TEST_PROCESSES; one (no parallel processes) on a single CPU."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:
        cpus = os.cpu_count() or 1
    return max(1, min(MAX_TEST_PROCESSES, cpus))


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """Each test process grades the catalogue with the seed this run resolved, in the tier it chose,
    and shares a folder with the others for the run (pytest-xdist's hook): there each says which of
    its tests share a fixture, and claims the catalogue's gradings it records."""
    config = node.config
    if not hasattr(config, "run_folder"):
        import tempfile

        config.run_folder = tempfile.mkdtemp(prefix="grader-test-run-")
    node.workerinput["catalog_seed"] = config.catalog_seed
    node.workerinput["default_tier"] = config.default_tier
    node.workerinput["run_started"] = config.run_started
    node.workerinput["run_folder"] = config.run_folder


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's load scheduling (the default of ``-n``), the tests sharing a fixture one unit."""
    if config.getvalue("dist") != "load" or not hasattr(config, "run_folder"):
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedTogether(LoadScopeScheduling):
        """Every test on its own, as load scheduling sends them, except the tests that share a
        fixture (``shared_units``): one unit each, sent to one test process, the largest first."""

        units = None

        def _split_scope(self, nodeid: str) -> str:
            if self.units is None:  # every process has collected by now; each wrote the same units
                self.units = {}
                for path in (Path(config.run_folder) / "units").glob("*.json"):
                    self.units.update(json.loads(path.read_text(encoding="utf-8")))
            return self.units.get(nodeid, nodeid)

    return SharedTogether(config, log)


def pytest_unconfigure(config):
    folder = getattr(config, "run_folder", None)
    if folder and not hasattr(config, "workerinput"):
        import shutil

        shutil.rmtree(folder, ignore_errors=True)


def _bare_run(config) -> bool:
    return not config.option.markexpr and config.args_source == pytest.Config.ArgsSource.TESTPATHS


def pytest_addoption(parser):
    group = parser.getgroup("grader", "the grader's test suite")
    group.addoption("--catalog-seed", type=int, default=None, metavar="N",
                    help="the seed the catalogued submissions are graded with (default: the one the kept evidence "
                         "was recorded with, else a new one, kept beside the evidence)")
    group.addoption("--record-evidence", action="store_true",
                    help="grade every catalogued submission in a child again, replacing its recording")
    group.addoption("--update-golden", action="store_true",
                    help="write the catalogue's verdicts into tests/golden/<exercise>.json (review them with git diff)")


def pytest_configure(config):
    """Cut a bare run to the default tier. Resolve the catalogue's seed once: given, else the one the
    kept evidence was recorded with, else a new one (then kept beside the evidence, so the next run,
    in this clone or another, can replay what this one records)."""
    from grader.protocol import job as inputs

    from .recorded import evidence_folder, keep_seed, kept_seed

    config.default_tier = (config.workerinput["default_tier"] if hasattr(config, "workerinput")
                           else _bare_run(config))
    config.run_started = config.workerinput["run_started"] if hasattr(config, "workerinput") else time.time()
    if config.default_tier:
        config.option.markexpr = DEFAULT_TIER

    folder = evidence_folder()
    config.evidence_folder = folder
    seed = config.getoption("--catalog-seed")
    if seed is None and hasattr(config, "workerinput"):  # a test process of pytest-xdist: the run's seed
        seed = config.workerinput["catalog_seed"]
    if seed is None and folder is not None:
        seed = kept_seed(folder)
    if seed is None:
        seed = inputs.new_seed()
    if seed < 0:
        raise pytest.UsageError(f"--catalog-seed takes a seed of 0 or more, not {seed}")
    config.catalog_seed = seed
    if folder is not None and not hasattr(config, "workerinput"):
        try:
            keep_seed(folder, seed)
        except OSError as exc:
            raise pytest.UsageError(f"the catalogue's evidence folder {folder} cannot be written ({exc}): "
                                    "set GRADE_EVIDENCE_CACHE to another folder, or to off") from None


def pytest_report_header(config):
    where = (f"kept in {config.evidence_folder} (GRADE_EVIDENCE_CACHE=off keeps none)"
             if config.evidence_folder is not None else "not kept (GRADE_EVIDENCE_CACHE=off)")
    tier = ("tier: default (the slow tier: -m slow; both: -m 'slow or not slow')" if config.default_tier
            else f"tier: as selected (-m {config.option.markexpr!r})" if config.option.markexpr
            else "tier: the tests named")
    return [tier, f"catalogue: seed {config.catalog_seed} (--catalog-seed {config.catalog_seed} repeats it), "
                  f"recorded evidence {where}"]


@pytest.fixture(scope="session")
def catalog_verdicts(request, tmp_path_factory):
    """{(exercise, name): Verdict} for every exercise's solution, stub, mistakes and variants: the
    verdicts of the solutions are the ones other tests need of a passing submission too.

    Each submission's evidence is recorded once, by a child forked from the batch's warm worker
    (TensorFlow imported once, as ``grade batch`` grades a class; tests/test_batch.py shows those
    verdicts equal a fresh grading process's), and kept outside the clone keyed by everything it
    depends on, its content and never a path (tests/recorded.py). A later run — in this clone, a
    fresh one or a worktree — replays the recordings whose key still matches, so only the judge
    runs again: editing a check re-judges the whole catalogue in seconds.
    ``GRADE_CATALOG_ONLY=ch15_encoder,ch15_decoder`` grades only those exercises' entries (with ``-k``
    to select their tests): a developer's run of one catalogue."""
    from grader import exercises

    from .catalog import catalog
    from .recorded import Claims, EvidenceCache, Recorder, grade_all

    config = request.config
    folder = tmp_path_factory.mktemp("catalog")  # keyed as <catalog>: wherever it lies, the keys agree
    only = [i.strip() for i in os.environ.get("GRADE_CATALOG_ONLY", "").split(",") if i.strip()]
    items = []
    for exercise in (map(exercises.get, only) if only else exercises.EXERCISES.values()):
        mistakes, variants = catalog(exercise.id)
        sources = {"solution": exercise.solution.read_text(encoding="utf-8"),
                   "stub": exercise.stub.read_text(encoding="utf-8")}
        sources.update({f"mistake_{m.name}": m.source for m in mistakes})
        sources.update({f"variant_{v.name}": v.source for v in variants})
        (folder / exercise.id).mkdir(exist_ok=True)
        for name, source in sources.items():
            path = folder / exercise.id / f"{name}.py"
            path.write_text(source, encoding="utf-8")
            items.append((exercise.id, name, path))

    run_folder = getattr(config, "workerinput", {}).get("run_folder")
    recordings = (config.evidence_folder if config.evidence_folder is not None
                  else Path(run_folder) if run_folder else tmp_path_factory.mktemp("evidence"))
    evidence = EvidenceCache(recordings / "catalog", config.catalog_seed, places={folder: "<catalog>"},
                             refresh=config.run_started if config.getoption("--record-evidence") else False)
    recorder = Recorder(evidence, warm_runner)
    settings = Settings(seed=config.catalog_seed)
    claims = None
    if run_folder:  # the run's test processes share the recording: each starts at its own place in the
        # catalogue, records what no other has claimed, and replays the rest once its holder lets it go
        claims = Claims(Path(run_folder) / "claims")
        start = len(items) * int(config.workerinput["workerid"].removeprefix("gw") or 0) // max(
            1, int(config.workerinput.get("workercount", 1)))
        items = items[start:] + items[:start]
    verdicts = {(exercise_id, name): verdict for (exercise_id, name, _), verdict in grade_all(
        lambda item: Grading(item[0], item[2], settings, runner=recorder,
                             judges=_RecordingJudges(CATALOG_REQUESTS, (item[0], item[1]))), items, WARM_JOBS,
        claims=claims, name=lambda item: f"{item[0]}/{item[1]}")}
    evidence.prune()
    kept = os.environ.get("GRADE_CATALOG_VERDICTS")
    if kept:  # for .ci/compare_pythons.py: this Python's verdicts, to compare another's with (each
        # test process that grades the catalogue writes the same verdicts, whole, one after the other)
        part = Path(f"{kept}.{os.getpid()}.part")
        part.write_text(json.dumps({"seed": config.catalog_seed, "verdicts": {
            f"{exercise_id}/{name}": [v.status, v.score, [[c.id, c.status] for c in v.checks]]
            for (exercise_id, name), v in verdicts.items()}}), encoding="utf-8")
        part.replace(kept)
    return verdicts


CATALOG_REQUESTS: dict = {}  # (exercise, name) -> the judge request of its grading in catalog_verdicts


class _RecordingJudges:
    """This process's judges, keeping the request (the evidence and the numbers the grader drew)
    a grading gives them."""

    def __init__(self, store: dict, key):
        self.store, self.key = store, key

    def __call__(self):
        from grader.judging.client import shared_judges

        shared_judges()
        return self

    def start(self, request: bytes, checks_timeout: float):
        from grader.judging.client import shared_judges

        self.store[self.key] = request
        return shared_judges().start(request, checks_timeout)


@pytest.fixture(scope="session")
def catalog_requests(catalog_verdicts):
    """{(exercise, name): judge request} of every catalogued submission that got as far as its checks."""
    return CATALOG_REQUESTS
