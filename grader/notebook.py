"""The grader inside a notebook: what the hidden test cells of the nbgrader course call.

``assert_topic("exercise3", "weights")`` finds the answer the kernel executed
(the last cell that defines the exercise's class or function), grades it the
same way ``grade`` does — in a child process, once per kernel and answer — and
raises AssertionError naming every failed check of that topic, with its
message, so nbgrader scores the cell 0 and its feedback shows why. Nothing is
written to stderr: nbgrader would zero a correct cell for it.
"""

from __future__ import annotations

import ast
import tempfile
from pathlib import Path

from . import exercises

_VERDICTS: dict[tuple[str, str], object] = {}


def answer_source(target: str, history: list[str]) -> str:
    """The last executed cell that defines ``target`` at top level."""
    for source in reversed(history):
        try:
            tree = ast.parse(source)
        except SyntaxError:
            continue
        for node in tree.body:
            if isinstance(node, (ast.ClassDef, ast.FunctionDef)) and node.name == target:
                return source
    raise AssertionError(f"No cell of this notebook defines {target}: run the answer cell before the tests.")


def _history() -> list[str]:
    from IPython import get_ipython

    shell = get_ipython()
    if shell is None:
        raise AssertionError("assert_topic runs inside a Jupyter notebook.")
    return list(shell.user_ns.get("In", []))


def verdict_for(exercise_id: str, source: str):
    key = (exercise_id, source)
    if key not in _VERDICTS:
        from .grading import grade

        with tempfile.TemporaryDirectory(prefix="grade-notebook-") as folder:
            path = Path(folder) / f"{exercise_id}.py"
            path.write_text(source, encoding="utf-8")
            _VERDICTS[key] = grade(exercise_id, path)
    return _VERDICTS[key]


def assert_topic(exercise_id: str, topic: str) -> None:
    exercise = exercises.get(exercise_id)
    verdict = verdict_for(exercise_id, answer_source(exercise.target, _history()))
    lines, failure = topic_report(verdict, topic)
    for line in lines:
        print(line)
    if failure is not None:
        raise AssertionError(failure)


def topic_report(verdict, topic: str) -> tuple[list[str], str | None]:
    """What a test cell of ``topic`` prints for this verdict, and the failure it raises (None if
    every check of the topic passed). ``grade batch --gradebook`` writes the same as cell outputs."""
    if verdict.status == "error":
        return [], f"Your answer could not be graded: {verdict.error}"
    checks = [c for c in verdict.checks if c.topic == topic]
    if not checks:
        return [], f"The grader has no {topic} checks for {verdict.exercise}."
    lines = [f"{'✓' if c.status == 'passed' else '✗'} {c.title} ({c.id}): {c.points:g}/{c.max_points:g}"
             for c in checks]
    failed = [c for c in checks if c.status != "passed"]
    if not failed:
        return lines, None
    details = "\n\n".join(f"{c.title} ({c.id}, {c.status}):\n{c.message}" for c in failed)
    return lines, f"{len(failed)} of {len(checks)} {topic} check(s) did not pass.\n\n{details}"
