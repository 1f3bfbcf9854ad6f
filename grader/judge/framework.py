"""The vocabulary of checks: the ``@check`` marker and the ways a check ends."""

from __future__ import annotations

import pytest

from ..verdict import TOPICS


def check(id: str, title: str, topic: str, points: float = 1):
    """Mark a pytest function as a graded check."""
    if topic not in TOPICS:
        raise ValueError(f"unknown topic {topic!r}; topics are {', '.join(TOPICS)}")
    return pytest.mark.check(id=id, title=title, topic=topic, points=points)


class CheckFailed(AssertionError):
    """The student's layer does not have the checked property; ``cause``, when the evidence shows
    that the failure of another check explains this one, names that check."""

    def __init__(self, message: str, cause: str | None = None):
        super().__init__(message)
        self.cause = cause


class Unavailable(Exception):
    """The evidence a check needs does not exist; ``status`` says why."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


def fail(observed: str, expected: str, why: str, cause: str | None = None) -> None:
    """Fail the current check with a message that teaches. ``cause``: the check whose failure, as the
    evidence shows, explains this one (its report then tells this failure under that one)."""
    raise CheckFailed(f"Observed: {observed}\nExpected: {expected}\nWhy it matters: {why}", cause)


RANDOM_AT_INFERENCE = "forward.inference"  # the check whose failure explains an output that differs call to call
_judged = []  # the evidence the running checks judge (set by the plugin for each session)


def judging(evidence) -> None:
    """Say which evidence the checks now running judge (``output_cause`` reads it)."""
    _judged[:] = [evidence]


def output_cause() -> str | None:
    """The failure that explains a check's failure to find the outputs it compares as they should be:
    the layer itself random at inference, as the child's two calls on one input showed."""
    evidence = _judged[0] if _judged else None
    return RANDOM_AT_INFERENCE if evidence is not None and getattr(evidence, "random_at_inference", False) else None
