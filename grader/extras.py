"""What each kind of user installs, and the message a command gives when its extra is missing.

``pip install transformer-exercises`` carries what a student needs to grade, hint, watch and
explain. The instructor's notebook tools come with the ``instructor`` extra (pyproject.toml): the
commands that import them ask ``missing_instructor_tools`` first, and say exactly what to install
instead of ending in an ImportError.
"""

from __future__ import annotations

import importlib.util
import shlex

from . import location

DISTRIBUTION = "transformer-exercises"
# The modules the instructor's commands import (grader/integrations/course.py, grader/integrations/gradebook.py), each
# from a package of the instructor extra.
INSTRUCTOR_MODULES = ("nbgrader", "nbformat", "traitlets", "sqlalchemy")


def install_line(extra: str) -> str:
    """The pip command that adds ``extra``: from a clone, the clone's editable install."""
    if location.INSTALLED_FROM_WHEEL:
        return f"pip install {shlex.quote(f'{DISTRIBUTION}[{extra}]')}"
    return f"pip install -e {shlex.quote(f'{location.PROJECT_ROOT}[{extra}]')}"


def _missing(modules) -> list[str]:
    missing = []
    for name in modules:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    return missing


def missing_instructor_tools(command: str) -> str | None:
    """Why ``command`` cannot run here (the instructor extra is not installed), or None."""
    missing = _missing(INSTRUCTOR_MODULES)
    if not missing:
        return None
    return (f"{command} needs the instructor tools ({', '.join(missing)} not installed): "
            f"{install_line('instructor')}")
