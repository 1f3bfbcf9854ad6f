"""The registry of exercises: one id used everywhere, found from the exercises' own folders.

Every folder ``grader/exercises/<id>/`` with a ``spec.py`` is an exercise (``grader.exercises.spec``
says what the folder holds); adding one means adding its folder and its files at the top of the
repository, and editing nothing shared: its spec names its edition and its place there (``tracks``).
``python -m tools.check_exercises`` verifies each one.
"""

from __future__ import annotations

import importlib
import re
from pathlib import Path

from ..location import EXERCISES_DIR, INSTALLED_FROM_WHEEL, PACKAGE_DIR, PROJECT_ROOT, SOLUTIONS_DIR
from .spec import EDITIONS, Exercise, Notebook, WrittenAnswer

__all__ = ["EXERCISES", "EXERCISES_DIR", "Exercise", "INSTALLED_FROM_WHEEL", "Notebook", "PACKAGE_DIR",
           "PROJECT_ROOT", "SOLUTIONS_DIR", "WrittenAnswer", "get"]


def _natural(name: str) -> list:
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def _discover() -> dict[str, Exercise]:
    found = {}
    folders = sorted({spec.parent for folder in __path__ for spec in Path(folder).glob("*/spec.py")},
                     key=lambda folder: _natural(folder.name))
    for folder in folders:
        if not (folder / "__init__.py").is_file():  # the wheel would leave the exercise out
            raise ImportError(f"grader/exercises/{folder.name} has a spec.py but no __init__.py: "
                              "an exercise's folder is a package")
        exercise = importlib.import_module(f"{__name__}.{folder.name}.spec").EXERCISE
        if exercise.id != folder.name:
            raise ImportError(f"grader/exercises/{folder.name}/spec.py declares the exercise {exercise.id!r}: "
                              f"an exercise's id is its folder's name")
        found[exercise.id] = exercise
        if exercise.edition not in EDITIONS:
            raise ImportError(f"grader/exercises/{folder.name}/spec.py names the edition {exercise.edition!r}; "
                              f"the editions are {', '.join(EDITIONS)} (grader/exercises/spec.py)")
    places: dict = {}
    for exercise in found.values():
        if not isinstance(exercise.position, int) or exercise.position < 1:
            raise ImportError(f"grader/exercises/{exercise.id}/spec.py: position={exercise.position!r}; an exercise "
                              f"declares its place in edition {exercise.edition}'s track, 1 for the first")
        other = places.setdefault((exercise.edition, exercise.position), exercise.id)
        if other != exercise.id:
            raise ImportError(f"grader/exercises/{exercise.id}/spec.py: {other} has position {exercise.position} "
                              f"in edition {exercise.edition}'s track already")
    # edition by edition, each in the order a student does its exercises
    order = list(EDITIONS)
    return dict(sorted(found.items(), key=lambda item: (order.index(item[1].edition), item[1].position)))


EXERCISES = _discover()


def get(exercise_id: str) -> Exercise:
    try:
        return EXERCISES[exercise_id]
    except KeyError:
        known = ", ".join(EXERCISES)
        raise KeyError(f"unknown exercise {exercise_id!r}; known exercises: {known}") from None
