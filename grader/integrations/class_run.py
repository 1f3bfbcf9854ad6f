"""A class's run of ``grade batch``, from what to grade to the run's record: the API the command is a
thin layer over.

``plan`` surveys the paths given (``discovery``), cuts this run's share of the class (``shards``),
and either reads what an earlier part of a resumed run graded or prepares a new results folder
(``outputs``); nothing is graded yet, so every refusal comes before any work. ``grade`` then grades
the share (``batch``), writes a row for each submission that could not be read, and writes the run's
record with what the gradings' confinement was. The caller shows progress through ``on_result``.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from ..api import Settings
from .discovery import Discovery, LayoutError, class_ids, cut, survey
from .outputs import (Outputs, Result, ResultsFolderError, StartedRun, earlier_part, finish_run,
                      prepare_results_folder, refused_result, write_result)
from .shards import WHOLE, Shard, manifest


class PlanError(ValueError):
    """The run cannot start: a path that does not exist, a layout that cannot be read, a results
    folder that is not new, or a run to resume that is another."""


@dataclass
class ClassRun:
    """What one run grades and where its results go, decided before any grading."""

    exercise_id: str
    out: Path
    settings: Settings
    shard: Shard
    visibility: str | None  # Gradescope's visibility of the results files, if chosen
    resume: bool
    whole: Discovery  # the whole class the paths hold
    found: Discovery  # what this run grades: its share, less what an earlier part graded
    planned: dict  # the run's record, as it starts
    done: set[str] = field(default_factory=set)  # graded by the earlier part of a resumed run
    earlier: dict | None = None  # that part's record

    @property
    def share(self) -> int:
        """Submissions in this run's share of the class, those an earlier part graded included."""
        mine = cut(self.whole, self.shard)
        return len(mine.submissions) + len(mine.refused)

    @property
    def to_grade(self) -> int:
        """How many rows this run writes: a verdict per submission, an error row per refused one."""
        return len(self.found.submissions) + len(self.found.refused)


def plan(exercise_id: str, paths: list[Path], out: Path, settings: Settings, shard: Shard = WHOLE,
         visibility: str | None = None, resume: bool = False, force: bool = False) -> ClassRun:
    """Survey ``paths`` and prepare ``out`` (or, with ``resume``, read what it holds); raise PlanError."""
    done, earlier = set(), None
    try:
        whole = survey(paths, exercise_id)
        planned = manifest(exercise_id, shard, class_ids(whole), settings, visibility)
        if resume:
            done, earlier = earlier_part(out, planned)
        else:
            prepare_results_folder(out, force)
    except (FileNotFoundError, LayoutError, ResultsFolderError) as exc:
        raise PlanError(str(exc)) from None
    found = cut(whole, shard)
    if resume and done:
        found = dataclasses.replace(found, submissions=[s for s in found.submissions if s.id not in done],
                                    refused=[s for s in found.refused if s.id not in done])
    return ClassRun(exercise_id, out, settings, shard, visibility, resume, whole, found, planned, done, earlier)


def grade(run: ClassRun, jobs: int | None = None, on_result=None) -> list[Result]:
    """Grade ``run``, ``jobs`` at a time, calling ``on_result(result)`` as each is written: the refused
    rows first (written after the gradings, even when they are interrupted), then every grading. Ends
    with the run's record; returns every row this run wrote."""
    from .batch import run_batch
    from .platforms import gradescope_visibility

    exercise_id, found = run.exercise_id, run.found
    started = StartedRun.begin(run.out, run.planned, run.earlier)
    settings = dataclasses.replace(run.settings, private=tuple(found.private()))
    refused = [refused_result(exercise_id, submission) for submission in found.refused]
    for result in refused:
        if on_result is not None:
            on_result(result)
    graded: list[Result] = []
    with gradescope_visibility(run.visibility):
        try:
            if found.submissions:
                graded = run_batch(exercise_id, found.submissions, run.out, settings, jobs, on_result=on_result,
                                   resume=run.resume, started=started)
        finally:  # the refused rows join the results folder, even after an interrupted run
            with Outputs(run.out, append=run.resume or bool(found.submissions), started=started) as outputs:
                for result in refused:
                    write_result(outputs, result)
    results = refused + graded
    sandboxes = [result.verdict.context.get("sandbox") for result in results]
    finish_run(run.out, manifest(exercise_id, run.shard, class_ids(run.whole), settings, run.visibility, sandboxes,
                                 run.whole.skipped), started)
    return results
