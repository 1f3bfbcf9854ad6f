"""The package's layout holds its rules: read from the source's import statements (every one,
inside functions too), never by importing anything.

- no import circle among the grader's modules;
- the sandbox and the protocol need no TensorFlow (nor Keras, nor anything that imports them);
- the judge and the checks never import the probe, nor TensorFlow or Keras: a check judges numbers;
- a probe never imports the judge: what runs beside student code holds nothing of the checks;
- the grading API, the report, the command line and the grading server never import TensorFlow or
  Keras: the parent never does.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import grader

PACKAGE = Path(grader.__file__).resolve().parent
FRAMEWORKS = {"tensorflow", "keras", "jax", "torch"}


def _modules() -> dict[str, tuple[Path, bool]]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[1].startswith("_"):  # the wheel's copies of exercises and solutions
            continue
        is_package = parts[-1] == "__init__"
        found[".".join(parts[:-1] if is_package else parts)] = (path, is_package)
    return found


MODULES = _modules()


def _imports(name: str) -> set[str]:
    path, is_package = MODULES[name]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = name.split(".")[: None if is_package else -1]
                base = base[: len(base) - (node.level - 1)]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module
            submodules = [alias for alias in node.names if f"{module}.{alias.name}" in MODULES]
            if len(submodules) < len(node.names):
                found.add(module)
            found.update(f"{module}.{alias.name}" for alias in submodules)
    return found


IMPORTS = {name: _imports(name) for name in MODULES}


def _reached(start: str) -> set[str]:
    """Every module ``start`` may import, through the grader's modules; outside ones by top name.
    Importing a module runs its packages' ``__init__`` too, but for the importer's own packages,
    whose ``__init__`` ran before the importer."""
    seen, todo = set(), [start]
    while todo:
        name = todo.pop()
        own = {".".join(name.split(".")[:depth]) for depth in range(1, name.count(".") + 1)}
        if MODULES.get(name, (None, False))[1]:
            own.add(name)
        for imported in IMPORTS.get(name, ()):
            parts = imported.split(".")
            for depth in range(1, len(parts) + 1):
                step = ".".join(parts[:depth])
                if step in own and step != imported:
                    continue
                if step in MODULES and step not in seen:
                    seen.add(step)
                    todo.append(step)
            if imported not in MODULES and parts[0] != "grader":
                seen.add(parts[0])
    return seen


def _under(prefix: str) -> list[str]:
    return sorted(name for name in MODULES if name == prefix or name.startswith(prefix + "."))


def test_the_rules_read_a_real_package():
    assert len(MODULES) > 60
    assert "tensorflow" in _reached("grader.probe.__main__")
    assert "grader.judge.replay" in _reached("grader.exercises.exercise3.checks")


def test_no_module_imports_itself_through_others():
    circles = [name for name in MODULES if name in _reached(name)]
    assert circles == []


@pytest.mark.parametrize("module", _under("grader.sandbox") + _under("grader.protocol"))
def test_the_sandbox_and_the_protocol_need_no_framework(module):
    assert _reached(module) & FRAMEWORKS == set()


CHECKS = [f"grader.exercises.{name.split('.')[2]}.checks" for name in _under("grader.exercises")
          if name.endswith(".checks")]


@pytest.mark.parametrize("module", _under("grader.judge") + CHECKS)
def test_the_judge_never_imports_the_probe_nor_a_framework(module):
    reached = _reached(module)
    assert {name for name in reached if name.startswith("grader.probe")} == set()
    assert reached & FRAMEWORKS == set()


@pytest.mark.parametrize("module", [name for name in MODULES if name.endswith(".probe")] + _under("grader.probe"))
def test_a_probe_never_imports_the_judge(module):
    reached = _reached(module)
    assert {name for name in reached if name.startswith("grader.judge") or name.endswith(".checks")} == set()


@pytest.mark.parametrize("module", ["grader.api", "grader.report", "grader.cli", "grader.integrations.batch",
                                    "grader.server.daemon", "grader.server.client", "grader.cli.server"])
def test_the_grading_parent_never_imports_a_framework(module):
    assert _reached(module) & FRAMEWORKS == set()
