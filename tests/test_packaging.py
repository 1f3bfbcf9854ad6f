"""The wheel carries what students and instructors need, and the package finds it there."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from grader import exercises
from grader.integrations.autograder_zip import package_files

ROOT = exercises.PROJECT_ROOT


SOLVED = ("exercise1", "exercise3", "exercise4")


def build_wheel(out: Path, solved: tuple[str, ...] = ()) -> Path:
    """The wheel pip builds from a copy of this clone's sources (a build in the clone would leave
    build/ behind, whose stale files setuptools would pack into later wheels), in which the
    exercises ``solved`` have their solution as working copy. pip's build log is kept beside the
    wheel, as build.log."""
    source = out / "source"
    source.mkdir(parents=True, exist_ok=True)
    for name in ("pyproject.toml", "README.md", "MANIFEST.in"):
        shutil.copy(ROOT / name, source / name)
    for name in ("grader", "exercises", "solutions", "tools"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    for exercise_id in solved:
        shutil.copy(ROOT / "solutions" / f"{exercise_id}.py", source / "exercises" / f"{exercise_id}.py")
    result = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", str(source),
                             "-w", str(out)], capture_output=True, text=True, timeout=900)
    (out / "build.log").write_text(result.stdout + result.stderr, encoding="utf-8")
    assert result.returncode == 0, result.stderr
    (path,) = out.glob("transformer_exercises-*.whl")
    return path


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """Built where exercises 1, 3 and 4 were solved, as an instructor who tried them would."""
    return build_wheel(tmp_path_factory.mktemp("wheel"), solved=SOLVED)


def test_a_wheel_built_where_exercises_were_solved_ships_their_stubs(wheel):
    from grader.exercises.stubs import fresh_stub

    with zipfile.ZipFile(wheel) as archive:
        for exercise in exercises.EXERCISES.values():
            shipped = archive.read(f"grader/_exercises/{exercise.id}.py").decode()
            assert shipped == fresh_stub(exercise) == exercise.stub.read_text(encoding="utf-8"), exercise.id
            assert "raise NotImplementedError()" in shipped and shipped != exercise.solution.read_text()
    log = (wheel.parent / "build.log").read_text(encoding="utf-8")
    for exercise_id in SOLVED:  # the build says which working copies it left out
        assert f"source/exercises/{exercise_id}.py differs from the stub generated from its solution" in log
    assert "exercise2.py differs" not in log


def test_every_module_of_the_grader_is_in_the_wheel_none_listed_by_hand(wheel):
    """Packages are found, not listed: a new exercise's folder needs no line in pyproject.toml."""
    assert set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]) == {"find"}
    names = set(zipfile.ZipFile(wheel).namelist())
    modules = {path.relative_to(ROOT).as_posix() for path in (ROOT / "grader").rglob("*.py")
               if "__pycache__" not in path.parts}
    assert modules <= names, sorted(modules - names)


def test_the_wheel_carries_exercises_instructions_hints_and_solutions(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for exercise in exercises.EXERCISES.values():
        for path in (f"grader/_exercises/{exercise.id}.py", f"grader/_exercises/{exercise.id}.md",
                     f"grader/_exercises/hints/{exercise.id}.md", f"grader/_solutions/{exercise.id}.py",
                     f"grader/exercises/{exercise.id}/checks.py", f"grader/exercises/{exercise.id}/probe.py"):
            assert path in names, path
    assert "grader/judging/pytest.ini" in names
    for script in ("submit-class.sh", "grade-array.sbatch", "merge.sbatch"):  # the Slurm scripts
        assert f"grader/integrations/slurm/{script}" in names, script
    assert not any(name.startswith(("tests/", "solutions/", "exercises/")) for name in names)
    assert not any("nbgrader/" in name for name in names)  # the committed course is for drift checks only


def test_the_wheel_holds_what_the_autograder_zip_packs(wheel):
    """The Gradescope zip repacks the installed package (grader.integrations.autograder_zip): same files, same bytes."""
    with zipfile.ZipFile(wheel) as archive:
        built = {name: archive.read(name) for name in archive.namelist() if ".dist-info/" not in name}
    assert built == package_files()


def test_requires_python_admits_the_pythons_tensorflow_ships_wheels_for():
    from packaging.specifiers import SpecifierSet

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    supported = SpecifierSet(project["requires-python"])
    assert all(version in supported for version in ("3.11", "3.12", "3.13"))
    assert "3.10" not in supported and "3.14" not in supported


def test_a_clone_finds_its_own_files():
    assert not exercises.INSTALLED_FROM_WHEEL
    exercise = exercises.get("exercise3")
    assert exercise.stub == ROOT / "exercises" / "exercise3.py"
    assert exercise.solution == ROOT / "solutions" / "exercise3.py"
    assert exercise.instructions.is_file() and exercise.hints.is_file()
