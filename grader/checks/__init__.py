"""Hidden checks, one small pytest function per fact about a student's layer.

Each check carries an id, a title, a topic and points (``@check``), receives
the evidence the child returned (the ``evidence`` fixture) and fails with a
message that says what was observed, what was expected and why it matters.
"""

from .framework import CheckFailed, check, fail

__all__ = ["CheckFailed", "check", "fail"]
