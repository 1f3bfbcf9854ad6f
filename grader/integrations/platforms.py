"""A verdict in the results formats of the platforms where classes already grade.

- Gradescope's autograder ``results.json`` (https://gradescope-autograders.readthedocs.io,
  "Autograder Specifications"): ``gradescope_results``.
- PrairieLearn's external grading ``results.json`` (PrairieLearn's "External Grading"
  documentation, "Grading results"): ``prairielearn_results``.

Both are pure functions of the verdict, so one submission has one score everywhere:
Gradescope's ``score`` is the verdict's score, PrairieLearn's is the same score as a
fraction of the maximum. Every text either shows a student is made of texts of the
verdict bounded by ``grader.protocol.text.shown`` with the budget of their kind (why the
file could not be graded: four lines of 160 characters, as Gradescope's always-visible
test promises), and Gradescope's Markdown renders them as text. ``find_submission`` picks
the file to grade in a folder such as Gradescope's ``/autograder/submission/`` or PrairieLearn's ``/grade/student/``, and
``write_json`` writes a results file so that a reader never sees half of it.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import json
import os
import re
import tempfile
from pathlib import Path

from ..causes import told_once
from ..protocol.text import MESSAGE, NAME, REASON, shown, shown_verdict
from ..verdict import TOPICS

# Gradescope's visibility settings, from most to least shown.
VISIBILITIES = ("visible", "after_due_date", "after_published", "hidden")
DEFAULT_VISIBILITY = "after_due_date"
_visibility = contextvars.ContextVar("gradescope_visibility", default=DEFAULT_VISIBILITY)

SUBMISSION_SUFFIXES = (".py", ".ipynb")
_SKIPPED_FOLDERS = {"__pycache__", ".ipynb_checkpoints", "__MACOSX"}

# A check's status in words; its message says the rest ("Not checked: ..." for the last three).
STATUS_WORDS = {"passed": "Passed", "failed": "Failed", "error": "Error", "timeout": "Timed out",
                "skipped": "Skipped"}


@contextlib.contextmanager
def gradescope_visibility(visibility: str | None):
    """Within this block, ``gradescope_results`` uses ``visibility`` when given none
    (``grade batch --gradescope-visibility``); None keeps the default."""
    if visibility is None:
        yield
        return
    _check_visibility(visibility)
    token = _visibility.set(visibility)
    try:
        yield
    finally:
        _visibility.reset(token)


def _check_visibility(visibility: str) -> None:
    if visibility not in VISIBILITIES:
        raise ValueError(f"unknown Gradescope visibility {visibility!r}; choose from {', '.join(VISIBILITIES)}")


# --------------------------------------------------------------------------- Gradescope


def gradescope_results(verdict, visibility: str | None = None, execution_time: float | None = None) -> dict:
    """Gradescope's results.json for one verdict.

    The checks are its tests, in the order of the report (by topic), with their points and
    messages (Markdown); ``visibility`` applies to them and to the whole result. One more
    test, always visible and worth nothing, says whether the file could be graded at all —
    the "does it compile" check of Gradescope's specification — so a student learns at once
    that a file with a syntax error scored 0, whatever the visibility of the checks. It holds
    the whole maximum (and scores 0) when the file could not be graded, else 0 of 0.
    ``execution_time`` (seconds) defaults to the time the grading process ran. Every text is
    ``shown``.
    """
    verdict = shown_verdict(verdict)
    visibility = _visibility.get() if visibility is None else visibility
    _check_visibility(visibility)
    seconds = execution_time if execution_time is not None else verdict.context.get("seconds")
    told = told_once(verdict.checks)  # each cause of failure once, in its first test
    results = {
        "score": verdict.score,
        "output": _overview_markdown(verdict),
        "output_format": "md",
        "test_output_format": "md",
        "test_name_format": "text",
        "visibility": visibility,
        "stdout_visibility": "hidden",  # the grader's own log, for instructors
        "extra_data": {
            "exercise": verdict.exercise,
            "status": verdict.status,
            "max_score": verdict.max_score,
            "seed": verdict.context["seed"] if isinstance(verdict.context.get("seed"), int) else None,
            "backend": str(verdict.context.get("backend") or "tensorflow"),
        },
        "tests": [_loading_test(verdict)] + [_gradescope_test(check, visibility, told.get(check.id))
                                             for check in report_order(verdict)],
    }
    if isinstance(seconds, (int, float)):
        results["execution_time"] = max(0, round(seconds))
    return results


def _loading_test(verdict) -> dict:
    from ..exercises import EXERCISES

    exercise = EXERCISES.get(verdict.exercise)
    target = (f"the {'function' if exercise.kind == 'function' else 'class'} {exercise.target}"
              if exercise else "what the exercise asks for")
    if verdict.status == "error":
        # Nothing else is listed: the whole score is lost here, and the reason is shown now.
        score, max_score, status = 0.0, verdict.max_score, "failed"
        output = error_markdown(verdict.error or "The submission could not be graded.")
    else:
        score, max_score, status = 0.0, 0.0, "passed"
        output = markdown_text(f"It loads and defines {target}; the checks below grade it.")
    return {"name": "Your file could be graded", "name_format": "text", "score": score, "max_score": max_score,
            "status": status, "output": output, "output_format": "md", "visibility": "visible"}


def _gradescope_test(check, visibility: str, message: str | None = None) -> dict:
    if message is not None:
        check = dataclasses.replace(check, message=message)
    return {
        "name": f"{check.title} ({check.id})",
        "name_format": "text",
        "score": check.points,
        "max_score": check.max_points,
        "status": "passed" if check.status == "passed" else "failed",
        "output": message_markdown(check),
        "output_format": "md",
        "tags": [shown(check.topic, NAME)],
        "visibility": visibility,
        "extra_data": {"id": check.id, "status": check.status},
    }


BACKEND_TITLES = {"tensorflow": "TensorFlow", "jax": "JAX", "torch": "PyTorch"}


def _overview_markdown(verdict) -> str:
    context = verdict.context
    title = context.get("title")
    backend = context.get("backend")
    on = f" (on {BACKEND_TITLES.get(backend, str(backend))})" if backend and backend != "tensorflow" else ""
    lines = [markdown_text(shown(f"{verdict.exercise}" + (f" — {title}" if title else "") + on, NAME))]
    if verdict.status == "error":
        lines.append("**" + markdown_text("This file could not be graded.") + "**")
        lines.append(error_markdown(verdict.error or ""))
    else:
        lines.append(markdown_text(
            f"{len(verdict.checks)} checks, grouped by topic. A failed check says what it observed, "
            "what it expected and why that matters."))
    if context.get("output"):
        lines.append("**" + markdown_text("What your code printed:") + "**")
        lines.append(_code_block(context["output"]))
    return "\n\n".join(lines)


def report_order(verdict) -> list:
    """The checks as the report lists them: topic by topic, in the order of the checks within one."""
    ordered = [c for topic in TOPICS for c in verdict.checks if c.topic == topic]
    return ordered + [c for c in verdict.checks if c.topic not in TOPICS]


_MARKDOWN_ESCAPES = {"\\": "\\\\", "`": "\\`", "*": "\\*", "_": "\\_", "[": "\\[", "]": "\\]",
                     "|": "\\|", "~": "\\~", "&": "&amp;", "<": "&lt;", ">": "&gt;"}
_BACKTICKS = re.compile(r"`+")
_LABELS = ("Observed:", "Expected:", "Why it matters:")


def markdown_text(text: str) -> str:
    """Plain text that renders as itself in Markdown: ``super().__init__(**kwargs)`` stays that,
    not bold; a line break stays a line break; text between backticks, as the messages write
    code, becomes code."""
    return "  \n".join(_markdown_line(line).rstrip() for line in text.splitlines())


def code_spans(line: str) -> list[tuple[int, int]]:
    """(start, end) of each code span of ``line``, as Markdown pairs backtick runs: a run opens one,
    the next run of the same length closes it. Linear in the line, whatever its runs (a student's
    text may be nothing but backticks)."""
    runs = [(match.start(), match.end()) for match in _BACKTICKS.finditer(line)]
    of_length: dict[int, list[int]] = {}
    for index, (start, end) in enumerate(runs):
        of_length.setdefault(end - start, []).append(index)
    looked = dict.fromkeys(of_length, 0)  # per length, how far its runs have been passed: each run once
    spans, index = [], 0
    while index < len(runs):
        start, end = runs[index]
        same = of_length[end - start]
        position = looked[end - start]
        while position < len(same) and same[position] <= index:
            position += 1
        looked[end - start] = position
        if position < len(same):
            spans.append((start, runs[same[position]][1]))
            index = same[position] + 1
        else:
            index += 1
    return spans


def _markdown_line(line: str) -> str:
    parts, position = [], 0
    for start, end in code_spans(line):
        parts.append(_escape(line[position:start]))
        parts.append(line[start:end])
        position = end
    parts.append(_escape(line[position:]))
    escaped = "".join(parts)
    # What would start a heading, a list or a heading's underline at the start of a line stays text.
    escaped = re.sub(r"^(\s*)([#+=-])", r"\1\\\2", escaped)
    return re.sub(r"^(\s*\d+)([.)])", r"\1\\\2", escaped)


def _escape(text: str) -> str:
    return "".join(_MARKDOWN_ESCAPES.get(ch, ch) for ch in text)


def message_markdown(check) -> str:
    """A check's status and message (``shown``) as Markdown: its labels in bold, each part a paragraph."""
    paragraphs = [f"**{markdown_text(shown(STATUS_WORDS.get(check.status, check.status), NAME))}**"]
    current: list[str] = []
    for line in shown(check.message or "", MESSAGE).splitlines():
        label = next((label for label in _LABELS if line.startswith(label)), None)
        if label and current:
            paragraphs.append("  \n".join(current))
            current = []
        if label:
            current.append(f"**{markdown_text(label)}**{markdown_text(line[len(label):])}")
        elif line.strip():
            current.append(markdown_text(line))
    if current:
        paragraphs.append("  \n".join(current))
    return "\n\n".join(paragraphs)


QUOTED = "    "  # how an error quotes lines of the file: a syntax error's line, and the caret under its column


def error_markdown(text: str) -> str:
    """Why a file could not be graded (``shown``), as Markdown: its words as text, and the lines it
    quotes of the file (indented by ``QUOTED``) in a fenced code block, so a syntax error's caret
    stays under its column; a fence longer than any run of backticks in them, so nothing a student
    wrote ends the block."""
    parts, plain, quoted = [], [], []

    def flush():
        if plain:
            parts.append(markdown_text("\n".join(plain)))
            plain.clear()
        if quoted:
            parts.append(_code_block("\n".join(quoted)))
            quoted.clear()

    for line in text.splitlines():
        if line.startswith(QUOTED) != bool(quoted):
            flush()
        (quoted if line.startswith(QUOTED) else plain).append(line[len(QUOTED):] if line.startswith(QUOTED)
                                                              else line)
    flush()
    return "\n\n".join(parts)


def _code_block(text: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}text\n{text}\n{fence}"


# --------------------------------------------------------------------------- PrairieLearn


def prairielearn_results(verdict) -> dict:
    """PrairieLearn's external grading results.json for one verdict.

    ``score`` is the verdict's score as a fraction in [0, 1]. A submission that could not be
    graded (exit code 2: a syntax error, a missing class, a crash or timeout at import) is
    ``"gradable": false`` with the reason in ``format_errors``: PrairieLearn then awards and
    takes no points and does not count the attempt. Every text is ``shown``.
    """
    verdict = shown_verdict(verdict)
    fraction = verdict.score / verdict.max_score if verdict.max_score else 0.0
    told = told_once(verdict.checks)  # each cause of failure once, in its first test
    results = {
        "gradable": verdict.status != "error",
        "score": min(1.0, max(0.0, fraction)),
        "message": _summary_line(verdict),
        "output": verdict.context.get("output") or "",
        "tests": [
            {
                "name": check.title,
                "description": shown(f"{check.id} ({check.topic})", NAME),
                "points": check.points,
                "max_points": check.max_points,
                "message": shown(told.get(check.id, check.message) or "", MESSAGE),
                "output": shown(STATUS_WORDS.get(check.status, check.status), NAME),
            }
            for check in report_order(verdict)
        ],
    }
    if verdict.status == "error":
        results["format_errors"] = [verdict.error or "The submission could not be graded."]
    return results


def _summary_line(verdict) -> str:
    if verdict.status == "error":
        return shown(f"Your file could not be graded: {verdict.error}", REASON)
    passed = sum(c.status == "passed" for c in verdict.checks)
    return shown(f"Score {verdict.score:g}/{verdict.max_score:g}: {passed} of {len(verdict.checks)} checks passed"
                 f"{'.' if verdict.status == 'passed' else '; each failed check below says why.'}", NAME)


# --------------------------------------------------------------------------- files


class SubmissionNotFound(Exception):
    """A submission folder holds no file, or several, that could be the submission."""


def find_submission(folder: Path, exercise_id: str) -> Path:
    """The .py file or .ipynb notebook to grade in ``folder`` (searched below it too): the only
    one there, else the one named after the exercise (``exercise3.py`` or ``exercise3.ipynb``)."""
    folder = Path(folder)
    candidates = sorted(
        path for path in folder.rglob("*")
        if path.suffix in SUBMISSION_SUFFIXES and path.is_file()
        and not any(part in _SKIPPED_FOLDERS or part.startswith(".") for part in path.relative_to(folder).parts)
    )
    if len(candidates) == 1:
        return candidates[0]
    named = [path for path in candidates if path.stem == exercise_id]
    if len(named) == 1:
        return named[0]
    names = ", ".join(str(path.relative_to(folder)) for path in candidates[:10])
    if not candidates:
        raise SubmissionNotFound(f"No .py file or .ipynb notebook was submitted (the submission folder "
                                 f"holds {_describe_folder(folder)}). Submit {exercise_id}.py or "
                                 f"{exercise_id}.ipynb.")
    raise SubmissionNotFound(f"Several files could be the submission ({names}"
                             f"{', ...' if len(candidates) > 10 else ''}). Submit one file, or name the "
                             f"one to grade {exercise_id}.py or {exercise_id}.ipynb.")


def _describe_folder(folder: Path) -> str:
    if not folder.is_dir():
        return "nothing: it does not exist"
    names = sorted(p.name for p in folder.iterdir())
    if not names:
        return "nothing"
    return ", ".join(names[:10]) + (", ..." if len(names) > 10 else "")


def write_json(path: Path, data: dict) -> Path:
    """Write ``data`` as JSON to ``path`` (folders created) through a temporary file, so that a
    platform reading it never sees a half-written file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=path.parent, prefix=f".{path.name}.", delete=False,
                                     encoding="utf-8") as handle:
        json.dump(data, handle, indent=1)
        handle.write("\n")
    os.replace(handle.name, path)
    return path
