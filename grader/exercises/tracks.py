"""The tracks: which edition of the book a workspace follows, and its exercises in order.

The second edition's chapter 11 and the third edition's chapter 15 teach the same layers with other
names, signatures and mask arguments. Each edition is a track: a name (what ``grade init --edition``
takes), the chapter it follows and its exercises, in the order a student does them. Adding a track
is adding its exercises' folders (each spec names its edition and its place in it) and one line of
``EDITIONS`` (``grader/exercises/spec.py``); ``grade init``, ``grade list``, the nbgrader course and
the next step a passing report gives (``next_step``) read the tracks and nothing else.

A workspace says which track it follows by the exercise files it holds: ``grade init --edition 3``
writes only the third edition's. A clone of the repository holds every track's files.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import EDITIONS, EXERCISES


@dataclass(frozen=True)
class Track:
    name: str  # what `grade init --edition NAME` takes
    chapter: str  # the book's chapter the exercises follow, as the report names it
    exercises: tuple[str, ...]  # ids, in the order a student does them
    closing: str = ""  # what the report of its last exercise says once it passes (the edition's)

    def position(self, exercise_id: str) -> int:
        """1 for the track's first exercise, ...; what `grade N` means inside the track's workspace."""
        return self.exercises.index(exercise_id) + 1


TRACKS = tuple(Track(name, edition.chapter, tuple(e.id for e in EXERCISES.values() if e.edition == name),
                     edition.closing) for name, edition in EDITIONS.items())
DEFAULT = "2"  # the track of `grade init` without --edition, and of a folder that holds no exercise files


def names() -> list[str]:
    return [track.name for track in TRACKS]


def get(name: str) -> Track:
    for track in TRACKS:
        if track.name == str(name):
            return track
    raise KeyError(f"unknown edition {name!r}; the exercises follow editions {', '.join(names())}")


def of(exercise_id: str) -> Track:
    """The track an exercise belongs to."""
    for track in TRACKS:
        if exercise_id in track.exercises:
            return track
    raise KeyError(f"the exercise {exercise_id!r} belongs to no track (grader/exercises/tracks.py)")


def in_folder(exercises_folder: Path | None) -> list[Track]:
    """The tracks whose exercise files a workspace's ``exercises/`` folder holds, in table order:
    one in a workspace ``grade init`` wrote, every track in a clone, none when there is no folder."""
    if exercises_folder is None:
        return []
    return [track for track in TRACKS
            if any((Path(exercises_folder) / f"{exercise_id}.py").is_file() for exercise_id in track.exercises)]


def next_step(exercise_id: str) -> str:
    """What the report of a passing grading tells the student to do next: the track's next exercise
    (after a step of the exercise's own, where it declares one), or the track's closing words after its
    last; nothing for an exercise of no track."""
    try:
        track = of(exercise_id)
    except KeyError:
        return ""
    exercise = EXERCISES[exercise_id]
    place = track.exercises.index(exercise_id)
    if place + 1 == len(track.exercises):
        return track.closing or f"That was the last exercise of {track.chapter}."
    following = EXERCISES[track.exercises[place + 1]]
    if exercise.step_before_next:
        return f"Next: {exercise.step_before_next}; then `grade {following.id}`."
    return f"Next: {following.id}, {following.title.lower()} — read exercises/{following.id}.md, then " \
           f"`grade {following.id}`."
