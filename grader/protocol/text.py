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
"""

from __future__ import annotations

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
