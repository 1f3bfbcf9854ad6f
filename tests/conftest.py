"""Shared fixtures: grading many submissions at once, with children running in parallel."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from grader.api import Settings, grade_many

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# Rich reads the terminal's width from COLUMNS (and a captured output has no terminal): every
# report a test reads is rendered at this width, whatever the terminal running the suite. Tests
# of narrower or wider renderings give their Console a width of its own.
os.environ["COLUMNS"] = "100"
os.environ.pop("LINES", None)

JOBS = max(1, min(3, os.cpu_count() or 1))
WARM_JOBS = 2 * JOBS  # forked gradings wait part of their time for the grader: more of them keep the cores busy


def grade_sources(exercise_id: str, sources: dict[str, str], folder: Path, settings: Settings = Settings()):
    """Write each source to ``folder/<name>.py`` and grade them all; {name: Verdict}."""
    paths = {}
    for name, source in sources.items():
        path = folder / f"{name}.py"
        path.write_text(source, encoding="utf-8")
        paths[path.resolve()] = name
    return {paths[path]: verdict for path, verdict in grade_many(exercise_id, list(paths), settings, jobs=JOBS)}


@pytest.fixture(scope="session")
def catalog_verdicts(tmp_path_factory):
    """{(exercise, name): Verdict} for every exercise's solution, stub, mistakes and variants,
    graded in one batch."""
    from grader import exercises

    from .catalog import catalog

    folder = tmp_path_factory.mktemp("catalog")
    items = []
    for exercise in exercises.EXERCISES.values():
        mistakes, variants = catalog(exercise.id)
        sources = {"solution": exercise.solution.read_text(encoding="utf-8"),
                   "stub": exercise.stub.read_text(encoding="utf-8")}
        sources.update({f"mistake_{m.name}": m.source for m in mistakes})
        sources.update({f"variant_{v.name}": v.source for v in variants})
        (folder / exercise.id).mkdir()
        for name, source in sources.items():
            path = folder / exercise.id / f"{name}.py"
            path.write_text(source, encoding="utf-8")
            items.append((exercise.id, name, path))
    from grader.api import Grading
    from grader.integrations.batch import Workers

    # forked from the batch's warm worker (TensorFlow imported once), as grade batch grades a class;
    # tests/test_batch.py shows those verdicts equal a fresh grading process's. As grade_pairs does,
    # with each grading's judge request kept (catalog_requests).
    workers = Workers()
    verdicts, pending, queue = {}, [], list(items)
    try:
        while queue or pending:
            while queue and len(pending) < WARM_JOBS:
                exercise_id, name, path = queue.pop(0)
                judges = _RecordingJudges(CATALOG_REQUESTS, (exercise_id, name))
                pending.append(((exercise_id, name), Grading(exercise_id, path, runner=workers, judges=judges)))
            key, grading = pending.pop(0)
            verdicts[key] = grading.finish()
        return verdicts
    finally:
        for _, grading in pending:
            grading.close()
        workers.close()


CATALOG_REQUESTS: dict = {}  # (exercise, name) -> the judge request of its grading in catalog_verdicts


class _RecordingJudges:
    """This process's judges, keeping the request (the evidence and the numbers the grader drew)
    a grading gives them."""

    def __init__(self, store: dict, key):
        self.store, self.key = store, key

    def __call__(self):
        from grader.judge.client import shared_judges

        shared_judges()
        return self

    def start(self, request: bytes, checks_timeout: float):
        from grader.judge.client import shared_judges

        self.store[self.key] = request
        return shared_judges().start(request, checks_timeout)


@pytest.fixture(scope="session")
def catalog_requests(catalog_verdicts):
    """{(exercise, name): judge request} of every catalogued submission that got as far as its checks."""
    return CATALOG_REQUESTS
