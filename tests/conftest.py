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
    graded in one batch. ``GRADE_CATALOG_ONLY=ch15_encoder,ch15_decoder`` grades only those
    exercises' entries (with ``-k`` to select their tests): a developer's run of one catalogue."""
    from grader import exercises

    from .catalog import catalog

    only = [i.strip() for i in os.environ.get("GRADE_CATALOG_ONLY", "").split(",") if i.strip()]
    folder = tmp_path_factory.mktemp("catalog")
    items = []
    for exercise in (map(exercises.get, only) if only else exercises.EXERCISES.values()):
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
    from grader.integrations.batch import Workers
    from grader.api import grade_pairs

    names = {path.resolve(): name for _, name, path in items}
    # forked from the batch's warm worker (TensorFlow imported once), as grade batch grades a class;
    # tests/test_batch.py shows those verdicts equal a fresh grading process's
    workers = Workers()
    try:
        return {
            (exercise_id, names[path]): verdict
            for exercise_id, path, verdict in grade_pairs([(e, p) for e, _, p in items], jobs=WARM_JOBS,
                                                          runner=workers)
        }
    finally:
        workers.close()
