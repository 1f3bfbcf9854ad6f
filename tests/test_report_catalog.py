"""Every catalogued submission's report, as a student reads it at 80 and 100 columns: within its
line budget, each line said once, one place to start, and advice naming only the exercise's parts."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from grader import exercises
from grader.exercises import tracks
from grader.causes import root_causes
from grader.report import render

from .catalog import catalog

EXERCISES = list(exercises.EXERCISES)
MISTAKES = [(e, m.name) for e in EXERCISES for m in catalog(e)[0]]
PASSING = [(e, "solution") for e in EXERCISES] + [(e, f"variant_{v.name}") for e in EXERCISES for v in catalog(e)[1]]

# Words that name a part (grader/exercises/spec.py PARTS): generic advice must not send a student to
# a part their exercise does not have (its spec's ``parts``).
WORDS = {
    "embedding": (),
    "attention": ("MultiHeadAttention", "attention mask", "expanded on"),
    "feed-forward": ("feed-forward", "dense_dim"),
    "norm": ("LayerNormalization",),
    "residual": ("residual sum",),
    "causal": ("causal",),
    "cross-attention": ("cross-attention", "encoder_outputs"),
    "pooling": (),
}
LACKING = {e: tuple(word for part, words in WORDS.items() if part not in exercises.get(e).parts for word in words)
           for e in EXERCISES}


def test_every_part_has_its_words_and_every_exercise_its_parts():
    from grader.exercises.spec import PARTS

    assert set(WORDS) == set(PARTS)
    assert all(exercises.get(e).parts and set(exercises.get(e).parts) <= set(PARTS) for e in EXERCISES)


ONE_CAUSE_LINES = 45  # at 100 columns
PER_MORE_CAUSE = 15
PASSING_LINES = 30


def text(verdict, width: int) -> str:
    console = Console(file=io.StringIO(), width=width, color_system=None, legacy_windows=False)
    console.print(render(verdict, next_step=tracks.next_step(verdict.exercise)))
    return console.file.getvalue()


def repeated_long_lines(out: str) -> list[str]:
    lines = [line.strip("│ ").strip() for line in out.splitlines()]
    lines = [line for line in lines if len(line) > 40 and not set(line) <= set("─╭╮╰╯│ ")]
    return sorted({line for line in lines if lines.count(line) > 1})


@pytest.mark.parametrize("exercise, name", MISTAKES, ids=[f"{e}-{n}" for e, n in MISTAKES])
def test_a_mistake_is_reported_within_budget_once_and_in_the_exercise_own_words(catalog_verdicts, exercise, name):
    verdict = catalog_verdicts[(exercise, f"mistake_{name}")]
    causes = root_causes(verdict.checks)
    wide = text(verdict, 100)
    budget = ONE_CAUSE_LINES + PER_MORE_CAUSE * (len(causes) - 1)
    assert len(wide.splitlines()) <= budget, (len(causes), wide)
    for out in (wide, text(verdict, 80)):
        assert repeated_long_lines(out) == [], out
        assert out.count("Start with") == 1
        start = " ".join(out.split("Start with")[1].split())
        assert f"({causes[0].root.id})" in start
    messages = "\n".join(c.message for c in verdict.checks)
    named = [word for word in LACKING[exercise] if re.search(re.escape(word), messages, re.IGNORECASE)]
    assert named == [], f"{exercise} has no {named}"


@pytest.mark.parametrize("exercise, name", PASSING, ids=[f"{e}-{n}" for e, n in PASSING])
def test_a_passing_report_is_short_and_says_what_next(catalog_verdicts, exercise, name):
    verdict = catalog_verdicts[(exercise, name)]
    out = text(verdict, 100)
    assert len(out.splitlines()) <= PASSING_LINES, out
    assert "Every check passed" in out and ("Next:" in out or "last exercise" in out)
    assert "Start with" not in out


@pytest.mark.parametrize("exercise", EXERCISES)
def test_a_stub_report_starts_with_its_first_stub(catalog_verdicts, exercise):
    verdict = catalog_verdicts[(exercise, "stub")]
    for width in (80, 100):
        out = text(verdict, width)
        assert repeated_long_lines(out) == [], out
        assert out.count("This part is still the stub") <= len(root_causes(verdict.checks))
        assert out.count("Start with") == 1
