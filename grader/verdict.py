"""The verdict: the plain result of grading one submission, and its JSON form.

This is the grading contract that tools rely on (see docs/command.md): field names,
statuses, topics and exit codes here are stable.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# The form of the JSON verdict (``Verdict.to_json``): a field added keeps it, a field changed or
# removed moves it on, so that a tool reading verdicts knows which form it reads.
VERDICT_VERSION = 1

TOPICS = ("api", "weights", "gradients", "config", "mask", "forward")
CHECK_STATUSES = ("passed", "failed", "error", "timeout", "skipped")

EXIT_PASSED = 0
EXIT_FAILED = 1
EXIT_ERROR = 2


@dataclass(frozen=True)
class CheckResult:
    id: str
    title: str
    topic: str
    status: str
    points: float
    max_points: float
    message: str
    # the check whose failure kept this one from running (for the report; not part of the JSON contract)
    cause: str | None = None

    def to_json(self) -> dict:
        return {"id": self.id, "title": self.title, "topic": self.topic, "status": self.status,
                "points": self.points, "max_points": self.max_points, "message": self.message}


@dataclass
class Verdict:
    exercise: str
    submission: str
    status: str
    score: float
    max_score: float
    error: str | None
    checks: list[CheckResult] = field(default_factory=list)
    # Shown in the report header; not part of the JSON contract.
    context: dict = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return {"passed": EXIT_PASSED, "failed": EXIT_FAILED}.get(self.status, EXIT_ERROR)

    def to_json(self) -> dict:
        return {
            "version": VERDICT_VERSION,
            "exercise": self.exercise,
            "submission": self.submission,
            "status": self.status,
            "score": self.score,
            "max_score": self.max_score,
            "error": self.error,
            "checks": [check.to_json() for check in self.checks],
            "backend": str(self.context.get("backend") or "tensorflow"),  # the Keras backend it ran on
        }


def summarise(exercise: str, submission: str, checks: list[CheckResult], context: dict,
              max_score: float | None = None) -> Verdict:
    """A verdict from check results: passed only when every check passed. ``max_score`` is the
    exercise's, from its checks' declarations (by default, the checks given)."""
    score = round(sum(c.points for c in checks), 6)
    max_score = round(sum(c.max_points for c in checks) if max_score is None else max_score, 6)
    status = "passed" if checks and all(c.status == "passed" for c in checks) and score == max_score else "failed"
    return Verdict(exercise, submission, status, score, max_score, None, list(checks), context)


def error_verdict(exercise: str, submission: str, message: str, max_score: float, context: dict) -> Verdict:
    """A submission that could not be graded at all (exit code 2)."""
    return Verdict(exercise, submission, "error", 0.0, max_score, message, [], context)


def cause_of(status: str, message: str, check_id: str) -> str | None:
    """The check a skipped one points to ("... (see check api.output_shape)."), if any."""
    if status != "skipped":
        return None
    found = re.search(r"\(see (?:check )?([a-z]+\.[a-z_]+)\)\.?\s*$", message)
    return found.group(1) if found and found.group(1) != check_id else None


def to_record(verdict: Verdict) -> dict:
    """Everything the report reads of a verdict, as plain JSON data: the contract's fields, each
    check's cause and the header's context (``from_record`` makes the same Verdict again)."""
    return {
        "exercise": verdict.exercise, "submission": verdict.submission, "status": verdict.status,
        "score": verdict.score, "max_score": verdict.max_score, "error": verdict.error,
        "checks": [dict(check.to_json(), cause=check.cause) for check in verdict.checks],
        "context": verdict.context,
    }


def from_record(record) -> Verdict:
    """The Verdict ``to_record`` gave; ValueError for anything not of that form."""
    def text(value, name, optional=False):
        if (value is None and optional) or isinstance(value, str):
            return value
        raise ValueError(f"{name} is not text")

    def number(value, name):
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return value
        raise ValueError(f"{name} is not a number")

    if not isinstance(record, dict) or not isinstance(record.get("checks"), list) \
            or not isinstance(record.get("context"), dict):
        raise ValueError("a verdict is an object with checks and a context")
    if record.get("status") not in ("passed", "failed", "error"):
        raise ValueError("a verdict's status is passed, failed or error")
    checks = []
    for check in record["checks"]:
        if not isinstance(check, dict):
            raise ValueError("a check is an object")
        if check.get("status") not in CHECK_STATUSES or check.get("topic") not in TOPICS:
            raise ValueError("a check's status or topic is not one of the contract's")
        checks.append(CheckResult(
            text(check.get("id"), "a check's id"), text(check.get("title"), "a check's title"), check["topic"],
            check["status"], number(check.get("points"), "a check's points"),
            number(check.get("max_points"), "a check's max_points"), text(check.get("message"), "a check's message"),
            text(check.get("cause"), "a check's cause", optional=True)))
    return Verdict(text(record.get("exercise"), "the exercise"), text(record.get("submission"), "the submission"),
                   record["status"], number(record.get("score"), "the score"),
                   number(record.get("max_score"), "the max_score"), text(record.get("error"), "the error", True),
                   checks, record["context"])
