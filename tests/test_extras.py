"""What a student and an instructor install, and what a command says when its extra is missing."""

from __future__ import annotations

import sys
import tomllib
from importlib import metadata

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from grader import cli, exercises, extras, location
from tools import generate

ROOT = exercises.PROJECT_ROOT
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
SELF = canonicalize_name(PROJECT["name"])
NOTEBOOK_TOOLS = {"nbgrader", "jupyterlab", "notebook", "jupyter-server", "nbconvert", "ipykernel"}


def resolve(extra_names: tuple[str, ...]) -> set[str]:
    """Every package an install of the project with ``extra_names`` brings: the requirements of
    pyproject.toml as it is now, then their own, read from the packages installed here (this
    environment holds every extra, `pip install -e '.[test]'`), so nothing is downloaded."""

    def wanted(requirement: Requirement, extras_of_it) -> bool:
        return requirement.marker is None or any(requirement.marker.evaluate({"extra": e}) for e in ("", *extras_of_it))

    queue = [Requirement(line) for line in PROJECT["dependencies"]]
    for extra in extra_names:
        queue += [Requirement(line) for line in PROJECT["optional-dependencies"][extra]]
    found: dict[str, set[str]] = {}
    while queue:
        requirement = queue.pop()
        if not wanted(requirement, ()):
            continue
        name = canonicalize_name(requirement.name)
        if name == SELF:  # an extra naming another extra of the project ("transformer-exercises[instructor]")
            for extra in requirement.extras:
                queue += [Requirement(line) for line in PROJECT["optional-dependencies"][extra]]
            continue
        if name in found and set(requirement.extras) <= found[name]:
            continue
        found[name] = found.get(name, set()) | set(requirement.extras)
        try:
            distribution = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError:
            if requirement.marker is None:
                raise AssertionError(f"{requirement} is needed but not installed here: pip install -e '.[test]'")
            continue
        for line in distribution.requires or []:
            inner = Requirement(line)
            if wanted(inner, found[name]):
                inner.marker = None
                queue.append(inner)
    return set(found)


def test_a_student_install_has_what_grading_needs_and_no_notebook_tools():
    student = resolve(())
    assert {"tensorflow", "keras", "numpy", "scipy", "autograd", "pytest", "rich", "watchfiles"} <= student
    assert not student & NOTEBOOK_TOOLS, sorted(student & NOTEBOOK_TOOLS)


def test_an_instructor_install_adds_nbgrader_and_jupyterlab():
    student, instructor = resolve(()), resolve(("instructor",))
    assert student < instructor
    assert {"nbgrader", "jupyterlab", "nbformat", "traitlets", "sqlalchemy"} <= instructor
    for module in extras.INSTRUCTOR_MODULES:  # each module the instructor's commands import has its package
        assert canonicalize_name(module) in instructor, module


def test_the_test_extra_holds_the_instructor_tools():
    assert resolve(("instructor",)) <= resolve(("test",))


def test_the_code_imports_only_what_its_install_declares():
    """Every third-party module the grader imports is the student's or, in the modules only
    the instructor's commands reach, the instructor's."""
    import ast

    instructor_only = {"integrations/gradebook.py", "integrations/course.py", "integrations/sample_class.py",
                       "notebook.py"}
    module_package = {"IPython": "ipython", "sklearn": "scikit-learn", "_pytest": "pytest"}
    student, instructor = resolve(()), resolve(("instructor",))
    # Keras's other backends: imported only where a grading runs on one, each from its own extra
    optional = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    backend_only = {"runtime.py"}  # probe/runtime.py imports the backend a grading runs on
    # check() runs in a notebook's kernel, which brings IPython; elsewhere it says to run grade instead
    kernel_only = {"in_notebook.py": {"ipython"}}
    backend_packages = {canonicalize_name(Requirement(r).name) for extra in ("jax", "torch") for r in optional[extra]}
    for path in sorted((ROOT / "grader").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            for name in names:
                top = name.split(".")[0]
                if top in sys.stdlib_module_names or top == "grader":
                    continue
                package = canonicalize_name(module_package.get(top, top))
                allowed = instructor if path.relative_to(ROOT / "grader").as_posix() in instructor_only else student
                if path.name in backend_only and path.parent.name == "probe":
                    allowed = allowed | backend_packages
                if path.parent.name == "grader":
                    allowed = allowed | kernel_only.get(path.name, set())
                assert package in allowed, f"{path.relative_to(ROOT)} imports {name}, which its install lacks"


def test_gelu_can_be_recomputed_in_a_student_install():
    import numpy as np

    from grader.judge.ops import activation

    # Keras's exact GELU, x * Phi(x): Phi(1) = 0.8413447460685429
    assert np.allclose(activation(np.array([0.0, 1.0, -1.0]), "gelu"),
                       [0.0, 0.8413447460685429, -0.15865525393145707])


BLOCK_INSTRUCTOR_TOOLS = f"import sys; sys.modules.update(dict.fromkeys({extras.INSTRUCTOR_MODULES!r}))"


@pytest.fixture
def no_nbgrader(monkeypatch):
    """An environment without the instructor extra: importing nbgrader (or nbformat, traitlets,
    sqlalchemy) fails."""
    for name in [n for n in sys.modules if n.split(".")[0] in extras.INSTRUCTOR_MODULES]:
        monkeypatch.delitem(sys.modules, name)
    for module in extras.INSTRUCTOR_MODULES:
        monkeypatch.setitem(sys.modules, module, None)


@pytest.mark.parametrize("argv, command", [
    (["nbgrader-course", "COURSE"], "grade nbgrader-course"),
    (["batch", "--gradebook", "COURSE", "--exercise", "exercise3", "--out", "OUT"], "grade batch --gradebook"),
    (["sample-class", "OUT"], "grade sample-class"),  # it writes the course, and answers
])
def test_an_instructor_command_without_the_extra_says_what_to_install(no_nbgrader, tmp_path, monkeypatch, capsys,
                                                                     argv, command):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        cli.main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"{command} needs the instructor tools (nbgrader, nbformat, traitlets, sqlalchemy not "
                          "installed): pip install -e ")
    assert f"{ROOT}[instructor]" in err  # a clone's own editable install
    assert not (tmp_path / "COURSE").exists() and not (tmp_path / "OUT").exists()


def test_from_a_wheel_the_install_line_names_the_package(no_nbgrader, monkeypatch):
    monkeypatch.setattr(location, "INSTALLED_FROM_WHEEL", True)
    assert extras.missing_instructor_tools("grade nbgrader-course") == (
        "grade nbgrader-course needs the instructor tools (nbgrader, nbformat, traitlets, sqlalchemy not installed): "
        "pip install 'transformer-exercises[instructor]'")


def test_regenerating_the_stubs_without_the_extra_says_what_to_install(no_nbgrader, capsys):
    assert generate.main(["--check"]) == 2
    assert "python -m tools.generate needs the instructor tools" in capsys.readouterr().err


def test_with_the_extra_nothing_is_missing():
    assert extras.missing_instructor_tools("grade nbgrader-course") is None


def test_a_batch_without_the_gradebook_needs_no_instructor_tools(tmp_path):
    """grade batch of plain files, in a process where no instructor module can be imported."""
    import json
    import os
    import subprocess

    submission = tmp_path / "alice.py"
    submission.write_text(exercises.get("exercise1").solution.read_text(encoding="utf-8"), encoding="utf-8")
    code = f"{BLOCK_INSTRUCTOR_TOOLS}; from grader.cli import main; sys.exit(main(sys.argv[1:]))"
    result = subprocess.run([sys.executable, "-c", code, "batch", str(submission), "--exercise", "1", "--out",
                             str(tmp_path / "out"), "--jobs", "1"], capture_output=True, text=True, timeout=600,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", GRADE_STATE_DIR=str(tmp_path / "state")))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    (verdict,) = [json.loads(line) for line in (tmp_path / "out" / "verdicts.jsonl").read_text().splitlines()]
    assert verdict["status"] == "passed" and verdict["id"] == "alice"


def test_check_outside_a_notebook_says_to_grade_a_file_even_without_ipython(monkeypatch):
    """A student's install need not hold IPython: check() called where there is none tells what to
    run instead, as it does in a plain Python that has IPython."""
    from grader.in_notebook import CheckError, check

    monkeypatch.setitem(sys.modules, "IPython", None)
    with pytest.raises(CheckError, match="grade exercise3 --submission"):
        check("exercise3")
