"""Build steps that pack the exercise files generated from the solutions, never a working copy.

In a clone, ``exercises/exercise3.py`` is both the committed stub and the student's working copy.
A wheel carries the exercises (their stubs, instructions and hints) inside the package, as
``grader/_exercises``, and the solutions and model answers as ``grader/_solutions``: the build copies
them there from the top of the repository (``PACKED``), so that every package of ``grader`` is found
and none is listed by hand. Someone who solves exercises in a clone and then builds a wheel (or an
sdist) would hand out the answers. These two setuptools commands, named in pyproject.toml's
``[tool.setuptools] cmdclass``, write every exercise file of the build from its solution instead
(``grader.exercises.stubs.fresh_stub``, the same generator ``python -m tools.generate`` uses), and
say which working copies they left out.

An editable install (``pip install -e .``) builds nothing: it keeps reading ``exercises/``, where
the student works.
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import sys
from pathlib import Path

from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

ROOT = Path(__file__).resolve().parent.parent


@contextlib.contextmanager
def _grader_from_source():
    """The ``grader`` package of this source tree (its registry and stub generator), loaded from
    its files for the build, whatever else is importable as ``grader`` (an editable install of
    another clone), and forgotten after."""
    saved = {name: module for name, module in sys.modules.items() if name == "grader" or name.startswith("grader.")}
    for name in saved:
        del sys.modules[name]
    try:
        loaded = []
        for name, path, package in (("grader", "grader", True),
                                    ("grader.exercises", "grader/exercises", True),
                                    ("grader.exercises.stubs", "grader/exercises/stubs.py", False)):
            location = ROOT / path
            spec = importlib.util.spec_from_file_location(
                name, location / "__init__.py" if package else location,
                submodule_search_locations=[str(location)] if package else None)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
            parent, _, leaf = name.rpartition(".")
            if parent:
                setattr(sys.modules[parent], leaf, module)
            loaded.append(module)
        _, exercises, stubs = loaded
        if Path(exercises.PROJECT_ROOT) != ROOT or exercises.INSTALLED_FROM_WHEEL:
            raise RuntimeError(f"the build read the exercises of {exercises.PACKAGE_DIR}, not of {ROOT}")
        yield exercises, stubs
    finally:
        for name in [n for n in sys.modules if n == "grader" or n.startswith("grader.")]:
            del sys.modules[name]
        sys.modules.update(saved)


def generated_exercise_files() -> tuple[dict[str, str], list[str]]:
    """({path of the exercise file below the source tree: its stub}, [edited working copies])."""
    with _grader_from_source() as (exercises, stubs):
        files = {f"exercises/{e.id}.py": stubs.fresh_stub(e) for e in exercises.EXERCISES.values()}
        edited = [str(e.stub) for e in stubs.edited_stubs()]
    return files, edited


def _write_stubs(folder: Path, relative_to: str, announce) -> None:
    """Write each exercise file into ``folder`` (where ``exercises/`` is packed as ``relative_to``)."""
    files, edited = generated_exercise_files()
    for relative, text in files.items():
        target = folder / relative_to / Path(relative).name
        if not target.parent.is_dir():
            continue  # this build does not pack the exercises
        target.unlink(missing_ok=True)  # sdist may hard-link the working copy: never write through it
        target.write_text(text, encoding="utf-8")
    for path in edited:
        announce(f"warning: {path} differs from the stub generated from its solution (a working copy?): "
                 "the build packs the stub instead", logging.WARNING)


# (folder at the top of the repository, the files of it a wheel carries, where in the package)
PACKED = (("exercises", ("*.py", "*.md"), "grader/_exercises"), ("exercises/hints", ("*.md",), "grader/_exercises/hints"),
          ("solutions", ("*.py", "*.md"), "grader/_solutions"))


def _copy_packed(build_lib: Path) -> None:
    """The exercises, hints and solutions, copied into the package of the build (``PACKED``)."""
    for folder, patterns, target in PACKED:
        destination = build_lib / target
        destination.mkdir(parents=True, exist_ok=True)
        for pattern in patterns:
            for path in sorted((ROOT / folder).glob(pattern)):
                (destination / path.name).write_bytes(path.read_bytes())


class BuildPy(build_py):
    """build_py that packs the exercises and solutions into the package, the exercise files as the
    stubs generated from the solutions."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        _copy_packed(Path(self.build_lib))
        _write_stubs(Path(self.build_lib), "grader/_exercises", self.announce)


class Sdist(sdist):
    """sdist whose ``exercises/<id>.py`` are the stubs generated from the solutions."""

    def make_release_tree(self, base_dir, files):
        super().make_release_tree(base_dir, files)
        _write_stubs(Path(base_dir), "exercises", self.announce)
