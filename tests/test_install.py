"""The package as students, instructors and Gradescope install it: fresh environments, outside the clone.

Each test makes a virtual environment and installs TensorFlow and the rest into it: minutes even
from pip's cache. They run only with GRADE_INSTALL_TESTS=1, which .ci/run sets; the README's test
command leaves them out.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

from grader import exercises
from grader.exercises import tracks

from .test_packaging import build_wheel
from .test_platforms import MISTAKE, lay_out

pytestmark = pytest.mark.skipif(
    not os.environ.get("GRADE_INSTALL_TESTS"),
    reason="installs TensorFlow into fresh environments (minutes); set GRADE_INSTALL_TESTS=1, as .ci/run does",
)

ROOT = exercises.PROJECT_ROOT
BASE_PYTHON_BIN = str(Path(os.path.realpath(sys.executable)).parent)  # the Python this venv was made from
SYSTEM_PATH = ["/usr/local/bin", "/usr/bin", "/bin"]
INSTALL_TIMEOUT = 1800


def environment(tmp_path: Path, path: list[str], **extra) -> dict:
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(PATH=os.pathsep.join(path), TF_CPP_MIN_LOG_LEVEL="3", COLUMNS="120",
               GRADE_STATE_DIR=str(tmp_path / "state"), **extra)
    return env


def run(command: list, cwd: Path, env: dict, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([str(part) for part in command], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=timeout)


@pytest.fixture(scope="module")
def student_install(tmp_path_factory):
    """A wheel built where exercise 1 was solved, installed outside the clone as a student installs
    it: with what its metadata declares, and nothing else. The tests below run in this order: the
    last one adds the instructor's extra."""
    tmp_path = tmp_path_factory.mktemp("student")
    wheel = build_wheel(tmp_path / "wheel", solved=("exercise1",))
    venv = tmp_path / "venv"
    env = environment(tmp_path, [str(venv / "bin"), BASE_PYTHON_BIN, *SYSTEM_PATH])
    made = run([sys.executable, "-m", "venv", venv], tmp_path, env)
    assert made.returncode == 0, made.stderr
    installed = run([venv / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check", wheel],
                    tmp_path, env, INSTALL_TIMEOUT)
    assert installed.returncode == 0, installed.stdout[-3000:] + installed.stderr[-3000:]
    return SimpleNamespace(wheel=wheel, venv=venv, env=env, root=tmp_path)


def test_every_replay_operation_runs_where_only_the_packages_metadata_installed_it(student_install):
    """The judge's arithmetic needs more than the clone's environment may happen to hold (exact GELU
    needs scipy): the wheel alone, with what its metadata declares, runs tests/test_op_tape.py —
    every operation of the replay, GELU included, against Keras, values and gradients."""
    venv, env = student_install.venv, student_install.env
    checks = student_install.root / "checks"  # outside the clone: only the installed grader can be imported
    checks.mkdir()
    (checks / "test_op_tape.py").write_text((ROOT / "tests" / "test_op_tape.py").read_text(encoding="utf-8"),
                                           encoding="utf-8")
    where = run([venv / "bin" / "python", "-c", "import grader, scipy; print(grader.__file__)"], checks, env)
    assert where.returncode == 0 and Path(where.stdout.strip()).is_relative_to(venv), where.stdout + where.stderr
    tested = run([venv / "bin" / "python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_op_tape.py"],
                 checks, env, INSTALL_TIMEOUT)
    assert tested.returncode == 0, tested.stdout[-4000:] + tested.stderr[-2000:]
    assert " passed" in tested.stdout and "skipped" not in tested.stdout, tested.stdout[-2000:]


def test_a_wheel_installed_outside_the_clone_has_everything_a_class_needs(student_install):
    """Installed as a student installs it, then with the instructor's extra."""
    wheel, venv, env, tmp_path = (student_install.wheel, student_install.venv, student_install.env,
                                  student_install.root)
    grade = venv / "bin" / "grade"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    where = run([venv / "bin" / "python", "-c", "import grader.exercises as e; print(e.PACKAGE_DIR, "
                 "e.INSTALLED_FROM_WHEEL)"], elsewhere, env)
    package_dir, from_wheel = where.stdout.split()
    assert Path(package_dir).is_relative_to(venv) and from_wheel == "True"

    # A student: a workspace, the list, one exercise solved and graded.
    init = run([grade, "init", "ws"], elsewhere, env)
    assert init.returncode == 0, init.stderr
    workspace = elsewhere / "ws"
    assert "Next: cd ws && grade list" in init.stdout
    rows = json.loads(run([grade, "list", "--json"], workspace, env).stdout)
    second = tracks.get(tracks.DEFAULT).exercises  # a workspace made without --edition
    assert [Path(r["stub"]) for r in rows] == [workspace / "exercises" / f"{e}.py" for e in second]
    third = run([grade, "init", "ws3", "--edition", "3"], elsewhere, env)
    assert third.returncode == 0, third.stderr
    rows3 = json.loads(run([grade, "list", "--json"], elsewhere / "ws3", env).stdout)
    assert [r["id"] for r in rows3] == list(tracks.get("3").exercises)
    solution = Path(rows[2]["solution"])
    assert solution.is_relative_to(venv) and solution.read_text() == exercises.get("exercise3").solution.read_text()
    # The solutions travel inside the installed package, next to the grader the child must read, and
    # so does exercise 5's file with the reference encoder: a submission that reads either is
    # refused, where it would otherwise pass.
    steal = workspace / "exercises" / "exercise3.py"
    for folder, name in (("_solutions", "exercise3.py"), ("_exercises", "exercise5.py")):
        steal.write_text(exercises.get("exercise3").stub.read_text() + "\nimport os, grader\nexec(open(os.path.join("
                         f"os.path.dirname(grader.__file__), {folder!r}, {name!r})).read())\n")
        stolen = json.loads(run([grade, "exercise3", "--json"], workspace / "exercises", env).stdout)
        assert stolen["status"] == "error" and "PermissionError" in stolen["error"], (folder, stolen)
    (workspace / "exercises" / "exercise3.py").write_text(solution.read_text())
    graded = run([grade, "exercise3", "--json"], workspace / "exercises", env)
    assert graded.returncode == 0, graded.stderr
    verdict = json.loads(graded.stdout)
    assert verdict["status"] == "passed" and verdict["submission"] == str(workspace / "exercises" / "exercise3.py")
    listed = run([grade, "list"], workspace, env)
    assert "1 of 5 exercises passed" in listed.stdout and listed.stdout.count("not started") == 4
    hint = run([grade, "hint", "exercise1"], workspace, env)  # still the stub: a hint for its first cause
    assert hint.returncode == 0 and "hint 1 of" in hint.stdout and "api.constructor" in hint.stdout
    solved = run([grade, "hint", "exercise3"], workspace, env)
    assert solved.returncode == 0 and "no hint needed" in solved.stdout
    outside = run([grade, "exercise1"], elsewhere, env)
    assert outside.returncode == 2 and "grade init DIR" in outside.stderr
    # A student's install has no notebook tools; the instructor's commands say how to add them.
    notebook_tools = run([venv / "bin" / "python", "-c", "import importlib.util as u; print([m for m in "
                          "('nbgrader', 'jupyterlab', 'notebook', 'nbformat') if u.find_spec(m)])"], elsewhere, env)
    assert notebook_tools.stdout.strip() == "[]", notebook_tools.stdout + notebook_tools.stderr
    refused = run([grade, "nbgrader-course", "course"], elsewhere, env)
    assert refused.returncode == 2 and not (elsewhere / "course").exists()
    assert "pip install 'transformer-exercises[instructor]'" in refused.stderr, refused.stderr
    instructor = run([venv / "bin" / "python", "-m", "pip", "install", "--disable-pip-version-check",
                      f"{wheel}[instructor]"], tmp_path, env, INSTALL_TIMEOUT)
    assert instructor.returncode == 0, instructor.stdout[-3000:] + instructor.stderr[-3000:]

    # An instructor: a Gradescope zip whose wheel is the installed package, file for file.
    zipped = run([grade, "gradescope-autograder", "exercise3", "--out", "autograder.zip"], elsewhere, env)
    assert zipped.returncode == 0, zipped.stderr
    with zipfile.ZipFile(elsewhere / "autograder.zip") as archive:
        (inner,) = [name for name in archive.namelist() if name.endswith(".whl")]
        repacked = zipfile.ZipFile(io.BytesIO(archive.read(inner)))
    with zipfile.ZipFile(wheel) as built:
        expected = {name: built.read(name) for name in built.namelist() if ".dist-info/" not in name}
    assert {name: repacked.read(name) for name in repacked.namelist() if ".dist-info/" not in name} == expected

    # An instructor: the nbgrader course, the same as the committed one.
    course = run([grade, "nbgrader-course", "course"], elsewhere, env)
    assert course.returncode == 0, course.stderr
    committed = ROOT / "solutions" / "nbgrader"
    written = sorted(p.relative_to(elsewhere / "course") for p in (elsewhere / "course").rglob("*") if p.is_file())
    assert written == sorted(p.relative_to(committed) for p in committed.rglob("*") if p.is_file())
    for relative in written:
        assert (elsewhere / "course" / relative).read_bytes() == (committed / relative).read_bytes(), relative


def test_gradescope_setup_builds_an_image_whose_run_autograder_grades(tmp_path):
    """setup.sh as Gradescope runs it (but under a temporary root and bin folder): a fresh virtual
    environment from requirements.txt and the zip's wheel; then run_autograder with that grade."""
    archive = tmp_path / "autograder.zip"
    built = subprocess.run([sys.executable, "-m", "grader", "gradescope-autograder", "exercise3", "--out", archive],
                           capture_output=True, text=True, timeout=600)
    assert built.returncode == 0, built.stderr
    with zipfile.ZipFile(archive) as opened:
        entries = {info.filename: (b"", info.external_attr >> 16) for info in opened.infolist()}
    root = lay_out((archive, entries), tmp_path / "autograder", {"encoder.py": MISTAKE})
    bin_dir = tmp_path / "bin"
    env = environment(tmp_path, [BASE_PYTHON_BIN, *SYSTEM_PATH], AUTOGRADER_ROOT=str(root),
                      GRADE_BIN_DIR=str(bin_dir))
    setup = run(["bash", root / "source" / "setup.sh"], root, env, INSTALL_TIMEOUT)
    assert setup.returncode == 0, setup.stdout[-4000:] + setup.stderr[-4000:]
    assert "the reference solution of exercise3 passes" in setup.stdout
    assert (bin_dir / "grade").resolve().is_relative_to(root / "venv")

    seeded = environment(tmp_path, [str(bin_dir), *SYSTEM_PATH], AUTOGRADER_ROOT=str(root), GRADE_SEED="3")
    graded = run([root / "run_autograder"], root, seeded)
    assert graded.returncode == 0, graded.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    alone = subprocess.run([sys.executable, "-m", "grader", "exercise3", "--submission", root / "submission",
                            "--json"], capture_output=True, text=True, timeout=600,
                           env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", GRADE_SEED="3",
                                    GRADE_STATE_DIR=str(tmp_path / "state")))
    verdict = json.loads(alone.stdout)
    assert results["score"] == verdict["score"] < verdict["max_score"]
    assert [t["extra_data"]["status"] for t in results["tests"][1:]] == [
        c["status"] for topic in ("api", "weights", "gradients", "config", "mask", "forward")
        for c in verdict["checks"] if c["topic"] == topic]
