"""What an exercise is: the declaration each exercise's folder makes in its ``spec.py``.

An exercise is one folder, ``grader/exercises/<id>/``: its ``spec.py`` (this declaration), its
``job.py`` (the numbers the parent draws for it), its ``probe.py`` (what runs in the grading child)
and its ``checks.py`` (what the judge decides); and, at the top of the repository, its solution
(``solutions/<id>.py``, the single source, with nbgrader's solution markers), the stub generated
from it, its instructions and its hints. The registry (``grader.exercises``) finds the folders;
nothing else names an exercise.
"""

from __future__ import annotations

import importlib
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

from .. import location


@dataclass(frozen=True)
class WrittenAnswer:
    """A manually graded answer: in the nbgrader notebook only, scored by hand in formgrader."""

    grade_id: str
    points: float
    question: str
    model_answer_file: str  # in the solutions folder, which no grading can read

    @property
    def model_answer(self) -> str:
        return (location.SOLUTIONS_DIR / self.model_answer_file).read_text(encoding="utf-8")


@dataclass(frozen=True)
class Notebook:
    """What the exercise's nbgrader notebook needs beyond the instructions and the solution."""

    visible_test: str  # the plain asserts of the cell a student runs to check the basics
    # sentences of the instructions that speak of the .py workspace, and what a notebook student reads instead
    wording: tuple[tuple[str, str], ...] = ()
    written_answer: WrittenAnswer | None = None

    def check_cell(self, exercise_id: str) -> str:
        """The released "Check your work" cell; never graded. Where the grader is installed (a course's
        JupyterHub), it shows the grader's full report of the answer (``grader.in_notebook.check``),
        which scores nothing; elsewhere it runs the plain asserts and says they are a smoke test."""
        asserts = textwrap.indent(self.visible_test, "    ")
        return ("# Check your work: run this cell after your answer cell. It scores nothing: the test cells\n"
                "# below grade your notebook when it is graded.\n"
                "try:\n"
                "    from grader import check\n"
                "except ImportError:  # the grader is not installed here: plain asserts instead\n"
                "    check = None\n"
                "if check is not None:\n"
                '    print("The grader\'s full report on your answer: feedback, not a grade. The hidden tests "\n'
                '          "grade your notebook when it is handed in.")\n'
                f'    check("{exercise_id}")\n'
                "else:\n"
                '    print("The grader is not installed here, so these plain asserts are a smoke test only: "\n'
                '          "the hidden tests check everything when your notebook is graded.")\n'
                f"{asserts}"
                '    print("The smoke test passed.")')


@dataclass(frozen=True)
class Edition:
    """An edition of the book the exercises follow: the chapter, and what the report of its last
    exercise says once it passes (``grader.exercises.tracks.next_step``; by default, that it was the
    chapter's last)."""

    chapter: str
    closing: str = ""


# The editions, each a track (``grader.exercises.tracks``) by its name (what ``grade init --edition``
# takes). An exercise names its edition and its place in it; adding a track is adding its exercises
# and one line here, and adding an exercise at a track's end changes no closing words.
EDITIONS = {
    "2": Edition("Deep Learning with Python, 2nd edition, chapter 11",
                 closing=("That was the chapter's last exercise: you built the positional embedding, "
                          "self-attention, the Transformer encoder and decoder, and a text classifier that keeps "
                          "padding out of attention, trains and survives saving.")),
    "3": Edition("Deep Learning with Python, 3rd edition, chapter 15"),
}


# Phases that cannot run when an earlier one failed: phase -> (blocking phase, check naming it).
LAYER_PREREQUISITES = {
    "construct": ("load", "api.constructor"),
    "variables": ("construct", "api.constructor"),
    "values": ("variables", "api.output_shape"),
    "forward": ("values", "api.output_shape"),
    "mask": ("values", "api.output_shape"),
    "causal": ("values", "api.output_shape"),
    "functional": ("values", "api.output_shape"),
    "config": ("values", "api.output_shape"),
    "saving": ("values", "api.output_shape"),
    "inference": ("values", "api.output_shape"),
    "gradients": ("forward", "api.output_shape"),
}


# The parts an exercise's layer may be made of (``Exercise.parts``).
PARTS = ("embedding", "attention", "feed-forward", "norm", "residual", "causal", "cross-attention", "pooling")


@dataclass(frozen=True)
class Exercise:
    id: str
    title: str
    target: str  # the class (or, for kind "function", the function) the student writes
    notebook: Notebook
    kind: str = "layer"
    prerequisites: dict = field(default_factory=lambda: dict(LAYER_PREREQUISITES))
    # earlier exercises whose solutions the stub carries as reference layers (``grader.exercises.stubs``)
    provided: tuple[str, ...] = ()
    edition: str = "2"  # the track it belongs to (EDITIONS)
    position: int = 0  # its place in its track: a student does 1 first
    # what the layer (or model) is made of, of PARTS: a message names only parts the exercise has
    parts: tuple[str, ...] = ()
    # what the report of a passing grading says (``grader.exercises.tracks.next_step``): a step to take
    # before the track's next exercise (the words after its last are the edition's: EDITIONS)
    step_before_next: str = ""

    @property
    def class_name(self) -> str:
        return self.target

    @property
    def folder(self) -> Path:
        return location.PACKAGE_DIR / "exercises" / self.id

    @property
    def solution(self) -> Path:
        return location.SOLUTIONS_DIR / f"{self.id}.py"

    @property
    def stub(self) -> Path:
        """The stub as generated: in a clone, also the student's working copy."""
        return location.EXERCISES_DIR / f"{self.id}.py"

    @property
    def instructions(self) -> Path:
        return location.EXERCISES_DIR / f"{self.id}.md"

    @property
    def hints(self) -> Path:
        return location.EXERCISES_DIR / "hints" / f"{self.id}.md"

    @property
    def checks(self) -> Path:
        return self.folder / "checks.py"

    @property
    def checks_module(self) -> str:
        return f"grader.exercises.{self.id}.checks"

    @property
    def probe_module(self) -> str:
        return f"grader.exercises.{self.id}.probe"

    @property
    def job(self):
        """The exercise's ``job`` module: ``public()`` sizes and ``secret(rng, seed)`` inputs."""
        return importlib.import_module(f"grader.exercises.{self.id}.job")

    def public_job(self) -> dict:
        """The part of the job the child gets on start (the rest is drawn per run: ``grader.protocol.job``)."""
        return self.job.public()
