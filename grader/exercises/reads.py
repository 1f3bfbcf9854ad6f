"""What a grading process may read of this installation: the grader's modules it runs, and nothing else.

A grading process runs its entry points and the probe (``grader.child``, ``grader.probe``), the
protocol and the sandbox, the exercises' registry and each exercise's probe and job, and the
submission. Those modules, found as the import closure of the modules a grading
process starts from (``ENTRY_MODULES``, and the exercises' ``probe``, ``job``
and ``spec`` modules the registry loads by name), are the allow-list: their
source files and the bytecode Python keeps beside them. Everything else of the
package — the judge, every exercise's checks, the NumPy references, the
reports, the tools, and in a wheel the solutions and the exercise files — and
of what surrounds it — a clone's tests, solutions, git history and built
wheels, the distribution's own metadata — stays closed, in any form: source,
bytecode written later by anyone, a copy. The allow-list is data: the grader
puts it in the job, and the sandbox turns it into Landlock rules
(``grader.sandbox.landlock``) without knowing what any file is.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import os
import sys
from pathlib import Path

from ..location import INSTALLED_FROM_WHEEL, PACKAGE_DIR, PROJECT_ROOT

PACKAGE = "grader"
DISTRIBUTION = "transformer_exercises"
# Where a grading process starts: the fresh child, the batch worker and what it preloads, the fork
# of a worker, and the experiments of ``grade explain``. The registry imports each exercise's spec,
# job and probe by name (``EXERCISE_MODULES``).
ENTRY_MODULES = ("grader.child.__main__", "grader.child.worker", "grader.child.preload", "grader.child.forked",
                 "grader.explain.phases")
EXERCISE_MODULES = ("spec", "job", "probe")


@functools.lru_cache(maxsize=1)
def policy() -> dict:
    """{"grant": files a grading process may read, "closed": folders and files it may not read, even
    inside a folder it reads}: absolute paths, as the sandbox takes them (``limits``). Found once per
    process: a file compiled later is not granted, and Python reads its source instead."""
    return {"grant": tuple(readable_files()), "closed": tuple(closed_paths())}


def child_modules() -> list[str]:
    """Every module of the package a grading process may import, by name."""
    return sorted(_closure(tuple(_starts())))


def readable_files() -> list[str]:
    """The source file of each of ``child_modules`` and, where it exists now, its bytecode."""
    files = []
    for name in child_modules():
        source = _module_file(name)
        if source is None:
            continue
        files.append(str(source))
        for cached in _bytecode_files(source):
            files.append(str(cached))
    return files


def closed_paths() -> list[str]:
    """The package's folder, the clone around it (an editable install: its tests, solutions, history,
    builds), and the distribution's metadata and import hooks in every folder of Python's path."""
    closed = [PACKAGE_DIR]
    if not INSTALLED_FROM_WHEEL:
        closed.append(PROJECT_ROOT)
    for folder in sys.path:
        if not folder or not os.path.isdir(folder):
            continue
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for entry in entries:
            name = entry.lower().replace("-", "_")  # a distribution's name, normalised as pip writes it
            if name.startswith((f"{DISTRIBUTION}_", f"__editable__.{DISTRIBUTION}_", f"__editable___{DISTRIBUTION}_")):
                closed.append(Path(folder) / entry)
    return sorted({os.path.realpath(path) for path in closed})


def _starts():
    from . import EXERCISES

    yield from ENTRY_MODULES
    yield "grader.exercises"
    for exercise in EXERCISES.values():
        for part in EXERCISE_MODULES:
            yield f"grader.exercises.{exercise.id}.{part}"


@functools.lru_cache(maxsize=4)
def _closure(starts: tuple[str, ...]) -> frozenset[str]:
    """The modules ``starts`` import, and what those import, within the package, with each
    module's parent packages (importing a module runs its packages' ``__init__``)."""
    seen: set[str] = set()
    pending = list(starts)
    while pending:
        name = pending.pop()
        if name in seen or _module_file(name) is None:
            continue
        seen.add(name)
        pending.extend(_parents(name))
        pending.extend(imported_modules(name))
    return frozenset(seen)


def _parents(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def imported_modules(name: str) -> set[str]:
    """The package's modules that module ``name`` imports anywhere in its code (in a function too):
    ``import a.b``, ``from a import b`` (b a module or a name of a), relative forms resolved. A
    package's ``__getattr__`` (``grader.check``, the notebook's tool) imports only when its name is
    asked for, which importing the package never does: what it imports is not followed. A grading
    process that asked for such a name would be refused the module's file, never granted it."""
    path = _module_file(name)
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    if path.name == "__init__.py":
        tree.body = [node for node in tree.body
                     if not (isinstance(node, ast.FunctionDef) and node.name == "__getattr__")]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            found.add(module)
            for alias in node.names:
                found.add(f"{module}.{alias.name}")
    return {module for module in found if module == PACKAGE or module.startswith(PACKAGE + ".")
            if _module_file(module) is not None}


def _module_file(name: str) -> Path | None:
    """The source file of module ``name`` of the package (``__init__.py`` of a package), or None."""
    if name != PACKAGE and not name.startswith(PACKAGE + "."):
        return None
    relative = name.split(".")[1:]
    folder = PACKAGE_DIR.joinpath(*relative)
    for candidate in (folder / "__init__.py", folder.with_suffix(".py") if relative else None):
        if candidate is not None and candidate.is_file():
            return candidate
    return None


def _bytecode_files(source: Path) -> list[Path]:
    """The compiled forms of ``source`` that exist now (every optimisation level)."""
    cached = Path(importlib.util.cache_from_source(str(source)))
    stem = cached.name[:-len(".pyc")]
    return sorted(path for path in cached.parent.glob(f"{stem}*.pyc")
                  if path.name == f"{stem}.pyc" or path.name.startswith(f"{stem}.opt-"))
