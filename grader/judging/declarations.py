"""The checks an exercise declares, and its points: read from its check module.

Each ``check_*`` function of an exercise's ``checks.py`` carries its declaration
(``@check(id, title, topic, points=...)``); the grading parent reads them to know
what a verdict must hold (``grader.protocol.read_answer``), the score it is out of
and the points per topic (nbgrader's test cells, the course's tables). Reading
them imports the check module (NumPy, pytest) and runs no check; the registry
(``grader.exercises``), which the grading child imports too, never does.
"""

from __future__ import annotations

import functools
import importlib

from ..verdict import TOPICS


def declared_checks(exercise) -> list[dict]:
    """The ``@check`` declarations of ``exercise``'s check module, in the order pytest runs them:
    every check function the module holds, its own or imported from the checks the layer
    exercises share."""
    return [dict(declared) for declared in _declared(exercise.checks_module)]


@functools.lru_cache(maxsize=None)
def _declared(checks_module: str) -> tuple[dict, ...]:
    module = importlib.import_module(checks_module)
    declared = []
    for name, value in vars(module).items():
        if not (name.startswith("check_") and callable(value)):
            continue
        for mark in getattr(value, "pytestmark", ()):
            if mark.name == "check":
                meta = mark.kwargs
                declared.append({"id": meta["id"], "title": meta["title"], "topic": meta["topic"],
                                 "points": float(meta["points"])})
    return tuple(declared)


def topic_points(exercise) -> dict[str, float]:
    """Points per topic, in the order of the topics."""
    points: dict[str, float] = {}
    for declared in declared_checks(exercise):
        points[declared["topic"]] = points.get(declared["topic"], 0.0) + declared["points"]
    return {topic: points[topic] for topic in TOPICS if topic in points}


def max_points(exercise) -> float:
    """What the exercise's score is out of: the points of every check it declares."""
    return sum(declared["points"] for declared in declared_checks(exercise))
