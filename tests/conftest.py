"""Shared fixtures: grading many submissions at once, with children running in parallel."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from grader.grading import Settings, grade_many

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

JOBS = max(1, min(3, os.cpu_count() or 1))


def grade_sources(exercise_id: str, sources: dict[str, str], folder: Path, settings: Settings = Settings()):
    """Write each source to ``folder/<name>.py`` and grade them all; {name: Verdict}."""
    paths = {}
    for name, source in sources.items():
        path = folder / f"{name}.py"
        path.write_text(source, encoding="utf-8")
        paths[path.resolve()] = name
    return {paths[path]: verdict for path, verdict in grade_many(exercise_id, list(paths), settings, jobs=JOBS)}


@pytest.fixture(scope="session")
def exercise3_verdicts(tmp_path_factory):
    """Verdicts for the solution, the stub, and every mistake and variant of the catalog."""
    from grader import exercises

    from .exercise3_catalog import MISTAKES, VARIANTS

    exercise = exercises.get("exercise3")
    sources = {
        "solution": exercise.solution.read_text(encoding="utf-8"),
        "stub": exercise.stub.read_text(encoding="utf-8"),
    }
    sources.update({f"mistake_{m.name}": m.source for m in MISTAKES})
    sources.update({f"variant_{v.name}": v.source for v in VARIANTS})
    return grade_sources("exercise3", sources, tmp_path_factory.mktemp("exercise3"))
