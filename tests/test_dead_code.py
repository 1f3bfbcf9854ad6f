"""No dead code in what ships: every definition of the grader and its tools is used by them.

Vulture reads the source of ``grader/`` and ``tools/`` (the tests are left out: code only a
test calls is dead too) and lists what nothing refers to. What is used from outside Python's
sight is allowed by a rule that says who uses it; an allowance nothing needs any more fails.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

vulture = pytest.importorskip("vulture", reason="vulture is a test dependency (pip install -e '.[test]')")

ROOT = Path(__file__).resolve().parent.parent
CONFIDENCE = 60  # vulture's lowest: every unused function, class, method, attribute and variable


def _commands() -> set[str]:
    from grader.cli.commands import COMMANDS

    return {function for _, function in COMMANDS.values()}


# (what the rule allows, the files it applies to, the names it applies to): each is used from outside
# the grader's own Python, by whoever the reason names
RULES = [
    ("checks: collected by pytest, in the judge", r"grader/(exercises/\w+/checks|judge/contract)\.py",
     r"check_\w+"),
    ("commands: looked up by name in the table of grader/cli/commands.py", r"grader/cli/\w+\.py", "|".join(sorted(_commands()))),
    ("pytest's hooks, fixtures and attributes, in the judge's plugin", r"grader/judging/plugin\.py",
     r"pytest_\w+|\w+_fixture|repr_failure|shouldstop"),
    ("the kernel's constants, named as its headers name them", r"grader/sandbox/(kernel|landlock|seccomp)\.py",
     r"[A-Z][A-Z0-9_]+"),
    ("keras.ops' own parameters: a call binds as keras.ops binds it", r"grader/judge/operations\.py", r"[a-z_]+"),
    ("zipfile's fields of an entry, written for the archive", r"grader/integrations/autograder_zip\.py",
     r"create_system|external_attr|compress_type"),
    ("nbgrader's preprocessor hook and its configuration", r"grader/integrations/gradebook\.py",
     r"preprocess_cell|autograde_preprocessors"),
    ("called by the released notebooks' test cells; IPython's traceback hook", r"grader/notebook\.py",
     r"assert_topic|_render_traceback_"),
    ("IPython's display and traceback hooks, which a notebook calls", r"grader/in_notebook\.py",
     r"_repr_html_|_ipython_display_|_render_traceback_"),
    ("a module's attribute hook: `from grader import check` in a notebook", r"grader/__init__\.py", r"__getattr__"),
    ("the tempfile module's folder, set in a forked child", r"grader/child/forked\.py", r"tempdir"),
    ("setuptools' build commands, named in pyproject.toml", r"tools/build_stubs\.py", r"BuildPy|Sdist"),
    ("a grading's time on the student's clock, which the tests of that clock read", r"grader/sandbox/(evidence|process)\.py",
     r"student_seconds"),
]


def _unused() -> list:
    found = vulture.Vulture()
    found.scavenge([str(ROOT / "grader"), str(ROOT / "tools")])
    return found.get_unused_code(min_confidence=CONFIDENCE)


def _rule_of(item):
    path = Path(item.filename).resolve().relative_to(ROOT).as_posix()
    for rule in RULES:
        reason, files, names = rule
        if re.fullmatch(files, path) and re.fullmatch(names, item.name):
            return rule
    return None


def test_nothing_in_the_grader_or_its_tools_is_unused():
    unused = _unused()
    dead = sorted(f"{Path(i.filename).resolve().relative_to(ROOT)}:{i.first_lineno}: {i.typ} {i.name}"
                  for i in unused if _rule_of(i) is None)
    assert dead == [], "remove these, or add a rule that says who uses them:\n" + "\n".join(dead)
    needed = {_rule_of(i)[0] for i in unused}
    assert [rule[0] for rule in RULES if rule[0] not in needed] == []  # an allowance nothing needs is removed


def test_the_check_finds_a_function_nothing_calls(tmp_path):
    """The check itself: a module with an unused function, beside one that is used, names the first only."""
    (tmp_path / "module.py").write_text(
        "def used():\n    return 1\n\n\ndef forgotten():\n    return 2\n\n\nprint(used())\n", encoding="utf-8")
    found = vulture.Vulture()
    found.scavenge([str(tmp_path)])
    assert [item.name for item in found.get_unused_code(min_confidence=CONFIDENCE)] == ["forgotten"]
