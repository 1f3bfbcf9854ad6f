"""One bound for a submission's text, applied where it enters the grader, and one way to cut text.

Every string a grading process sends (error messages and tracebacks, exception
and class names, config values, the names a file defines) is cut to
``limits.MAX_TEXT`` characters as its record arrives (``bounded``), before anything
reads it (the probe reads its own records so before sending them:
``grader.protocol.records.arrived``); a check's message, which may quote several
of them, is cut by the judge to ``limits.MAX_MESSAGE``, the same constant the
grader accepts, so a long message is never a reason to refuse an answer. ``cut``
keeps within its limit,
its marker included, and ends at a word where one is near. Every writer
downstream (the terminal report, Markdown for Gradescope, HTML, CSV, JSON) is
linear in what it is given.

What a student is shown somewhere other than their own terminal (Gradescope's
and PrairieLearn's results, nbgrader's test cells, a student's page of the
class report) goes through ``shown``, the rule of Gradescope's always-visible
test: a few lines, each cut short, and how many more there were; control
characters and the characters that reorder text written as escapes. Each kind
of text has its budget: why a file could not be graded, ``REASON``, four lines
of 160 characters; a name or a title, ``NAME``, one line; what the code
printed, ``PRINTED``; a check's message, ``MESSAGE``, more than any message the
grader writes needs (a message quoting a submission's own text at length is
cut there).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from . import limits

MARKER = " [… cut]"
WORD_SEARCH = 40  # how far back a cut looks for a space


def cut(text: str, limit: int, marker: str = MARKER) -> str:
    """``text`` if it has at most ``limit`` characters, else its beginning and ``marker``, at most
    ``limit`` in all, cut after a word where a space is within WORD_SEARCH characters."""
    if len(text) <= limit:
        return text
    keep = max(0, limit - len(marker))
    space = text.rfind(" ", max(0, keep - WORD_SEARCH), keep + 1)
    end = space if space > 0 else keep
    return (text[:end].rstrip() + marker)[:limit]


def bounded(value, limit: int = limits.MAX_TEXT):
    """``value`` (a record as it arrived: dicts, lists, strings, numbers, arrays) with every string in
    it cut to ``limit`` characters; the rest as it was."""
    if isinstance(value, str):
        return cut(value, limit)
    if isinstance(value, dict):
        return {key: bounded(item, limit) for key, item in value.items()}
    if isinstance(value, list):
        return [bounded(item, limit) for item in value]
    return value


@dataclass(frozen=True)
class Budget:
    """How much of a text a student is shown in one place: ``lines`` lines of ``width`` characters."""

    lines: int
    width: int


VISIBLE_LINES = 4  # lines of why a file could not be graded, as Gradescope's always-visible test says it
VISIBLE_LINE_CHARS = 160  # characters of each of them
REASON = Budget(VISIBLE_LINES, VISIBLE_LINE_CHARS)  # a verdict's error, and any text that quotes it
NAME = Budget(1, VISIBLE_LINE_CHARS)  # a test's name, a check's title, a summary line
PRINTED = Budget(21, 200)  # what the code printed: the report's 20 lines of 200 characters and its note
MESSAGE = Budget(60, 1000)  # a check's message: its parts, a picture of a mask, an error's first lines
MORE = "(and {} more line(s): run grade on your file to see them)"
# Shown as escapes: control characters (the line breaks aside, which end lines) and the characters
# that reorder the text around them.
HIDDEN = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escaped(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(value, budget: Budget = REASON) -> str:
    """What a student is shown of ``value`` in one place: its first ``budget.lines`` lines (any line
    break Python reads ends one: \\r, \\x0b, \\x85, \\u2028, ...), each cut to ``budget.width``
    characters ending in …, then a line saying how many more lines there were (on a one-line budget,
    `` …`` ending the line instead); tabs as spaces, and control characters, bytes that are not text
    and the characters that reorder text as escapes (\\x1b, \\xff, \\u202e). Linear in ``value``;
    what it gives it gives back unchanged, so a text made of shown parts can be shown again."""
    text = str(value)
    try:  # a file name's bytes that are not UTF-8, kept by Python as surrogates: \xff
        text = text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no file name gives: \ud800
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    lines = text.splitlines()
    while lines and not lines[-1]:  # a line break that ends the text ends its last line, nothing more
        lines.pop()
    more = len(lines) - budget.lines
    if more == 1 and _SAID_MORE.fullmatch(lines[-1]):  # shown already
        lines, more = lines[:-1], int(_SAID_MORE.fullmatch(lines[-1]).group(1))
    kept = []
    for line in lines[:budget.lines]:
        line = HIDDEN.sub(_escaped, line[:budget.width + 1].expandtabs(4))
        kept.append(line if len(line) <= budget.width else line[:budget.width - 1] + "…")
    if more > 0 and budget.lines == 1:
        kept[-1] = kept[-1][:budget.width - 2].rstrip() + " …"
    elif more > 0:
        kept.append(MORE.format(more))
    return "\n".join(kept)


_SAID_MORE = re.compile(re.escape(MORE).replace(re.escape("{}"), "([0-9]{1,12})"))


def shown_verdict(verdict):
    """``verdict`` (a ``grader.verdict.Verdict``) as a student is shown it away from their own
    terminal: its error, its path, its context's title and printed output, and each check's title and
    message ``shown`` with the budget of their kind. A writer composes its fields from these."""
    checks = [replace(c, title=shown(c.title, NAME), message=shown(c.message, MESSAGE)) for c in verdict.checks]
    context = dict(verdict.context)
    for key, budget in (("title", NAME), ("output", PRINTED)):
        if context.get(key):
            context[key] = shown(context[key], budget)
    error = None if verdict.error is None else shown(verdict.error, REASON)
    return replace(verdict, submission=shown(verdict.submission, NAME), error=error, checks=checks, context=context)
