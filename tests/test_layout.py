"""The package's layout holds its rules: read from the source's import statements (every one,
inside functions too) and its run-time imports (``importlib.import_module`` of a name written out,
of a pattern such as ``f"grader.exercises.{id}.probe"`` — every module it can name —, or of an
exercise's ``checks_module``/``probe_module``), never by importing anything.

- no import circle among the grader's modules;
- the sandbox and the protocol need no TensorFlow (nor Keras, nor anything that imports them);
- the judge and the checks never import the probe, nor TensorFlow or Keras: a check judges numbers;
- a probe never imports the judge: what runs beside student code holds nothing of the checks;
- the grading API, the report, the command line and the grading server never import TensorFlow or
  Keras: the parent never does.
"""

from __future__ import annotations

import ast
import functools
import re
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


@functools.lru_cache(maxsize=None)
def _tree(path: Path) -> ast.Module:
    """A module's syntax tree, parsed once for every rule that reads it."""
    return ast.parse(path.read_text(encoding="utf-8"))


def _imports(name: str) -> set[str]:
    path, is_package = MODULES[name]
    found = set()
    for node in ast.walk(_tree(path)):
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
        elif isinstance(node, ast.Call) and _is_import_module(node.func) and node.args:
            found.update(_named_at_run_time(node.args[0], name))
    return found


def _relative_imports_outside(name: str) -> list[str]:
    """The relative imports of a module (inside functions too) that climb out of the grader's package
    or name nothing in it: Python only finds them out when the import runs."""
    path, is_package = MODULES[name]
    wrong = []
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = name.split(".")[: None if is_package else -1]
            if node.level - 1 >= len(base):
                wrong.append(f"line {node.lineno}: {'.' * node.level}{node.module or ''} climbs out of the package")
                continue
            base = base[: len(base) - (node.level - 1)]
            module = ".".join(base + ([node.module] if node.module else []))
            if module != "grader" and module not in MODULES and \
                    not all(f"{module}.{alias.name}" in MODULES for alias in node.names):
                wrong.append(f"line {node.lineno}: {'.' * node.level}{node.module or ''} is {module}, no module of the grader")
    return wrong


def _is_import_module(func) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or \
        (isinstance(func, ast.Name) and func.id == "import_module")


# an exercise's modules as its spec names them (grader.exercises.spec.Exercise)
_EXERCISE_MODULES = {"checks_module": "checks", "probe_module": "probe"}


def _job_probes() -> set[str]:
    """The probe modules jobs are given (``child_job(..., probe="...")`` anywhere in the package)."""
    found = set()
    for path, _ in MODULES.values():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == "child_job":
                for keyword in node.keywords:
                    if keyword.arg == "probe":
                        assert isinstance(keyword.value, ast.Constant), f"{path}: a job's probe named at run time"
                        found.add(keyword.value.value)
    assert found <= set(MODULES), found - set(MODULES)
    return found


_JOB_PROBES = _job_probes()
# run-time imports of a name chosen from data that is never the grader's: (importer, argument)
_NOT_THE_GRADERS = {("grader.judging.server", "name")}  # pytest's own plugins, imported once for every judge


def _named_at_run_time(argument, importer: str) -> set[str]:
    """The grader's modules an ``import_module`` argument can name (outside ones by their name)."""
    if isinstance(argument, ast.BoolOp):  # job.get("probe") or f"...": either
        return set().union(*(_named_at_run_time(value, importer) for value in argument.values))
    if isinstance(argument, ast.Constant) and isinstance(argument.value, str):
        return {argument.value}
    named = argument.attr if isinstance(argument, ast.Attribute) else getattr(argument, "id", None)
    if named in _EXERCISE_MODULES:  # exercise.checks_module, or a parameter of that name
        pattern = rf"grader\.exercises\.[^.]+\.{_EXERCISE_MODULES[named]}"
    elif isinstance(argument, ast.JoinedStr):
        pattern = ""
        for part in argument.values:
            if isinstance(part, ast.Constant):
                pattern += re.escape(part.value)
            elif isinstance(part.value, ast.Name) and part.value.id == "__name__":
                pattern += re.escape(importer)
            else:
                pattern += r"[^.]+"
    elif ast.unparse(argument) == "job.get('probe')":  # the probe a job names: every one a job is given
        return _JOB_PROBES
    else:
        assert (importer, ast.unparse(argument)) in _NOT_THE_GRADERS, \
            f"{importer} imports {ast.unparse(argument)} at run time: which of the grader's modules can it name?"
        return set()
    named = {module for module in MODULES if re.fullmatch(pattern, module)}
    assert named, f"{importer} imports {ast.unparse(argument)} at run time, which names none of the grader's modules"
    return named


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
    assert "tensorflow" in _reached("grader.child.__main__")
    assert "grader.judge.replay" in _reached("grader.exercises.exercise3.checks")
    # the run-time imports: the child's probe by pattern, the judge server's checks, the command table
    assert "grader.exercises.exercise3.probe" in IMPORTS["grader.child.__main__"]
    assert "grader.exercises.ch15_decoder.checks" in IMPORTS["grader.judging.server"]
    assert "grader.exercises.exercise5.probe" in IMPORTS["grader.child.preload"]
    assert "grader.explain.phases" in IMPORTS["grader.child.__main__"]  # a job's own probe
    assert "grader.exercises.exercise1.checks" in IMPORTS["grader.judging.declarations"]
    assert "grader.cli.classes" in IMPORTS["grader.cli"]


def test_every_relative_import_names_a_module_of_the_grader():
    wrong = {name: found for name in MODULES if (found := _relative_imports_outside(name))}
    assert wrong == {}


def test_no_module_imports_itself_through_others():
    circles = [name for name in MODULES if name in _reached(name)]
    assert circles == []


@pytest.mark.parametrize("module", _under("grader.sandbox") + _under("grader.protocol"))
def test_the_sandbox_and_the_protocol_need_no_framework(module):
    assert _reached(module) & FRAMEWORKS == set()


CHECKS = [f"grader.exercises.{name.split('.')[2]}.checks" for name in _under("grader.exercises")
          if name.endswith(".checks")]


@pytest.mark.parametrize("module", _under("grader.judge") + _under("grader.judging") + CHECKS)
def test_the_judge_never_imports_the_probe_nor_a_framework(module):
    reached = _reached(module)
    assert {name for name in reached if name.startswith(("grader.probe", "grader.child"))} == set()
    assert reached & FRAMEWORKS == set()


@pytest.mark.parametrize("module", [name for name in MODULES if name.endswith(".probe")] + _under("grader.probe")
                         + _under("grader.child"))
def test_a_probe_never_imports_the_judge(module):
    reached = _reached(module)
    assert {name for name in reached if name.startswith(("grader.judge", "grader.judging"))
            or name.endswith(".checks")} == set()


def _part(module: str) -> str:
    """The part of the package a module belongs to: its first level below ``grader`` (a subpackage
    with everything in it, or a module of its own)."""
    return ".".join(module.split(".")[:2])


PARTS = {_part(name): set() for name in MODULES if name != "grader"}
for _name, _imported in IMPORTS.items():
    for _target in _imported:
        if _target in MODULES and _target != "grader" and _name != "grader" and _part(_target) != _part(_name):
            PARTS[_part(_name)].add(_part(_target))


def _parts_reached(start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for part in PARTS[todo.pop()]:
            if part not in seen:
                seen.add(part)
                todo.append(part)
    return seen


def test_no_part_of_the_package_imports_itself_through_others():
    """The parts form layers: what the checks are written with (``judge``) and what a probe is written
    with (``probe``) below the exercises that use them, the processes that load the exercises
    (``judging``, ``child``) above them, the command above everything it runs."""
    assert {"grader.judge", "grader.judging", "grader.probe", "grader.child", "grader.exercises"} <= set(PARTS)
    circles = {part: sorted(p for p in PARTS[part] if part in _parts_reached(p)) for part in PARTS
               if part in _parts_reached(part)}
    assert circles == {}


@pytest.mark.parametrize("module", ["grader.api", "grader.report", "grader.cli", "grader.integrations.batch",
                                    "grader.workers", "grader.ungradable", "grader.server.daemon",
                                    "grader.server.client", "grader.cli.server"])
def test_the_grading_parent_never_imports_a_framework(module):
    assert _reached(module) & FRAMEWORKS == set()


def _private_uses(name: str) -> list[str]:
    """Where a module takes another module's private name (``from .x import _y``, or ``x._y`` of a
    grader module it imported): a name with a leading underscore is its own module's business."""
    path, is_package = MODULES[name]
    tree = _tree(path)
    modules, found = set(), []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("grader")):
            for alias in node.names:
                modules.add(alias.asname or alias.name)
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"line {node.lineno}: from {'.' * node.level}{node.module or ''} import {alias.name}")
        elif isinstance(node, ast.Import):
            modules.update((alias.asname or alias.name).split(".")[0] for alias in node.names
                           if alias.name.startswith("grader"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules \
                and node.attr.startswith("_") and not node.attr.startswith("__"):
            found.append(f"line {node.lineno}: {node.value.id}.{node.attr}")
    return found


def test_no_module_takes_another_modules_private_names():
    assert {name: found for name in MODULES if (found := _private_uses(name))} == {}
