"""Builds the zip Gradescope's autograder wants: ``grade gradescope-autograder EXERCISE --out ZIP``.

At its root, as Gradescope's "Autograder Specifications" ask:

- ``setup.sh`` runs once, as root, when Gradescope builds the autograder's image: it finds
  a Python that TensorFlow 2.21 supports (3.11 to 3.13; on Ubuntu 22.04, whose python3 is
  3.10, it installs python3.11), makes a virtual environment with ``requirements.txt`` and
  this package's wheel, puts ``grade`` on PATH, and grades the reference solution, so a
  broken image fails its build instead of every submission;
- ``run_autograder`` runs for each submission: it grades the ``.py`` file or ``.ipynb``
  notebook in ``$AUTOGRADER_ROOT/submission/`` with the ``grade`` found on PATH (else
  ``python3 -m grader``), with the same child process, limits and checks as ``grade``, and
  writes ``$AUTOGRADER_ROOT/results/results.json`` (``grader.integrations.platforms``);
- ``requirements.txt``: every dependency pinned to the version installed where the zip was
  built, so the container grades with what the instructor tested;
- ``transformer_exercises-<version>-py3-none-any.whl``: this package, as installed here
  (exercises, solutions and checks included), whether from a wheel or a clone;
- ``README.md``: what the zip holds, the settings it was built with and the Gradescope
  settings it needs.

``AUTOGRADER_ROOT`` defaults to ``/autograder``; setting it lets both scripts run elsewhere
(the tests lay the zip out as Gradescope does under a temporary folder).
"""

from __future__ import annotations

import base64
import hashlib
import shlex
import zipfile
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from .. import exercises
from .platforms import DEFAULT_VISIBILITY, VISIBILITIES

DISTRIBUTION = "transformer-exercises"
# Gradescope gives an autograder half a CPU by default, and its first TensorFlow import reads
# the library from a cold disk: the child's limit is wider than grade's default of 120 s (a run
# takes about 5 CPU seconds here, benchmarks/platform_resources.py), still far inside
# Gradescope's 10 minutes.
DEFAULT_TIMEOUT = 300.0
DEFAULT_MEMORY_MB = 4096
FIXED_TIME = (2020, 1, 1, 0, 0, 0)  # entries carry no build time: the same inputs give the same zip

SETUP_SH = r"""#!/usr/bin/env bash
# Gradescope runs this once, as root, when it builds the autograder's image. It installs a
# Python that TensorFlow 2.21 supports (3.11 to 3.13), a virtual environment holding the pinned
# requirements and this package, and puts `grade` on PATH for run_autograder.
#   AUTOGRADER_ROOT  Gradescope's folder (default /autograder); the zip is unpacked in its source/
#   GRADE_PYTHON     the Python to use (default: the first of python3, python3.13, python3.12,
#                    python3.11 that is 3.11 to 3.13; else python3.11 from the system's packages)
#   GRADE_VENV       where the virtual environment goes (default $AUTOGRADER_ROOT/venv)
#   GRADE_BIN_DIR    where the `grade` command is linked (default /usr/local/bin)
set -euo pipefail
export GRADE_SERVER=off  # an image is built, then graded in: no warm grading server is left running
ROOT="${AUTOGRADER_ROOT:-/autograder}"
SOURCE="$ROOT/source"
VENV="${GRADE_VENV:-$ROOT/venv}"
BIN_DIR="${GRADE_BIN_DIR:-/usr/local/bin}"
EXERCISE=__EXERCISE__

supported() {
    "$1" -c 'import sys; sys.exit(not (3, 11) <= sys.version_info[:2] <= (3, 13))' >/dev/null 2>&1
}

PYTHON="${GRADE_PYTHON:-}"
if [ -z "$PYTHON" ]; then
    for candidate in python3 python3.13 python3.12 python3.11; do
        if command -v "$candidate" >/dev/null 2>&1 && supported "$candidate"; then
            PYTHON="$(command -v "$candidate")"
            break
        fi
    done
fi
if [ -z "$PYTHON" ]; then
    echo "No Python 3.11 to 3.13 here (TensorFlow 2.21 needs one): installing python3.11."
    apt-get update
    DEBIAN_FRONTEND=noninteractive apt-get install -y python3.11 python3.11-venv
    PYTHON="$(command -v python3.11)"
fi
supported "$PYTHON" || { echo "$PYTHON is not Python 3.11 to 3.13" >&2; exit 1; }
echo "Using $PYTHON ($("$PYTHON" --version))"

if ! "$PYTHON" -m venv "$VENV"; then
    # Debian and Ubuntu ship venv's pip apart from Python itself.
    version="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    DEBIAN_FRONTEND=noninteractive apt-get install -y "python$version-venv"
    rm -rf "$VENV"
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --disable-pip-version-check -r "$SOURCE/requirements.txt"
"$VENV/bin/python" -m pip install --disable-pip-version-check --no-deps "$SOURCE"/__WHEEL__
mkdir -p "$BIN_DIR"
ln -sf "$VENV/bin/grade" "$BIN_DIR/grade"

# The image works when the reference solution passes in it.
solution="$("$VENV/bin/python" -c "from grader import exercises; print(exercises.get('$EXERCISE').solution)")"
if ! "$BIN_DIR/grade" "$EXERCISE" --submission "$solution" --timeout __TIMEOUT__ --memory __MEMORY_MB__; then
    echo "The reference solution of $EXERCISE does not pass in this image (report above)." >&2
    exit 1
fi
echo "Ready: grade is $BIN_DIR/grade, and the reference solution of $EXERCISE passes."
"""

RUN_AUTOGRADER = r"""#!/usr/bin/env bash
# Gradescope runs this for every submission. It grades the .py file or .ipynb notebook in
# $AUTOGRADER_ROOT/submission/ (the only one there, else the one named __EXERCISE__.py or
# __EXERCISE__.ipynb) and writes $AUTOGRADER_ROOT/results/results.json. The report printed
# here goes to Gradescope's stdout log, which only instructors see.
set -uo pipefail
export GRADE_SERVER=off  # one grading per container: no warm grading server
ROOT="${AUTOGRADER_ROOT:-/autograder}"
EXERCISE=__EXERCISE__
VISIBILITY=__VISIBILITY__
TIMEOUT=__TIMEOUT__
MEMORY_MB=__MEMORY_MB__

if command -v grade >/dev/null 2>&1; then
    GRADE=(grade)
else
    GRADE=(python3 -m grader)
fi
RESULTS="$ROOT/results/results.json"
mkdir -p "$ROOT/results"
rm -f "$RESULTS"
"${GRADE[@]}" "$EXERCISE" --submission "$ROOT/submission" --gradescope-results "$RESULTS" \
    --gradescope-visibility "$VISIBILITY" --timeout "$TIMEOUT" --memory "$MEMORY_MB"
status=$?
# 0: every check passed; 1: some failed; 2: the file could not be graded. Each wrote the results.
# Without them the grader itself failed, and Gradescope tells the student the autograder did.
if [ "$status" -le 2 ] && [ -s "$RESULTS" ]; then
    exit 0
fi
echo "grade ended with exit status $status and wrote no results" >&2
exit 1
"""

README = """\
# Gradescope autograder: {exercise} ({title})

Built by `grade gradescope-autograder {exercise}` with transformer-exercises {version}
on Python {python}.

| file | what |
|---|---|
| `setup.sh` | run by Gradescope once: Python 3.11-3.13, a virtual environment with `requirements.txt` and the wheel, `grade` on PATH, and a check that the reference solution passes |
| `run_autograder` | run by Gradescope for each submission: grades the `.py` file or `.ipynb` notebook in `/autograder/submission/` and writes `/autograder/results/results.json` |
| `requirements.txt` | every dependency, pinned to the versions it was built with |
| `{wheel}` | the grader, its checks, the exercises and their reference solutions |

Settings it was built with: time limit {timeout:g} s and memory limit {memory_mb} MiB for the
process running a submission; test visibility `{visibility}` (the test saying whether the file
could be graded at all is always visible).

In the assignment's Autograder Settings choose at least 1.0 CPU and 1.5 GB of RAM: grading
one submission holds about 0.7 GB (TensorFlow in the process running it), too close to the
default 768 MB. Gradescope's default timeout of 10 minutes is enough. See the project's
Gradescope guide, docs/gradescope.md.
"""


# What a student sees of a submission's results before the assignment's due date, by the visibility
# of the checks (the test saying whether the file could be graded is always visible)
BEFORE_THE_DUE_DATE = {
    "visible": "their score and every check, with its points and message, as soon as their file is graded",
    "after_due_date": "only whether their file could be graded, no score and no check; every check, with its "
                      "points and message, once the due date has passed",
    "after_published": "only whether their file could be graded, no score and no check; every check once you "
                       "publish the grades",
    "hidden": "only whether their file could be graded, before the due date and after it: the checks stay "
              "hidden from them",
}


def visibility_lines(visibility: str, exercise_id: str, out: Path) -> list[str]:
    """What ``grade gradescope-autograder`` says last: the visibility chosen, what students see
    before the due date, and how to choose another."""
    others = [v for v in BEFORE_THE_DUE_DATE if v != visibility]
    return [f"Test visibility: {visibility}. Before the due date, students see "
            f"{BEFORE_THE_DUE_DATE[visibility]}.",
            f"To change it, build the zip again with --visibility ({', '.join(others)}) and upload it: "
            f"grade gradescope-autograder {exercise_id} --out {out} --force --visibility "
            f"{'visible' if visibility != 'visible' else 'after_due_date'}"]


@dataclass(frozen=True)
class AutograderZip:
    path: Path
    exercise: str
    wheel: str
    requirements: list[str]


def build_autograder_zip(exercise_id: str, out: Path, visibility: str = DEFAULT_VISIBILITY,
                         timeout: float = DEFAULT_TIMEOUT, memory_mb: int = DEFAULT_MEMORY_MB) -> AutograderZip:
    """Write the autograder zip for ``exercise_id`` to ``out``."""
    import platform

    exercise = exercises.get(exercise_id)
    if visibility not in VISIBILITIES:
        raise ValueError(f"unknown visibility {visibility!r}; choose from {', '.join(VISIBILITIES)}")
    version = metadata.version(DISTRIBUTION)
    wheel_name, wheel = package_wheel()
    requirements = pinned_requirements()
    values = {
        "__EXERCISE__": shlex.quote(exercise.id),
        "__VISIBILITY__": shlex.quote(visibility),
        "__TIMEOUT__": shlex.quote(f"{timeout:g}"),
        "__MEMORY_MB__": shlex.quote(str(memory_mb)),
        "__WHEEL__": shlex.quote(wheel_name),
    }
    readme = README.format(exercise=exercise.id, title=exercise.title, version=version, wheel=wheel_name,
                           python=platform.python_version(), timeout=timeout, memory_mb=memory_mb,
                           visibility=visibility)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(out, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        _add(archive, "setup.sh", _fill(SETUP_SH, values).encode(), executable=True)
        _add(archive, "run_autograder", _fill(RUN_AUTOGRADER, values).encode(), executable=True)
        _add(archive, "requirements.txt", ("\n".join(requirements) + "\n").encode())
        _add(archive, wheel_name, wheel)
        _add(archive, "README.md", readme.encode())
    return AutograderZip(out, exercise.id, wheel_name, requirements)


def _fill(template: str, values: dict) -> str:
    for key, value in values.items():
        template = template.replace(key, value)
    return template


def _add(archive: zipfile.ZipFile, name: str, data: bytes, executable: bool = False) -> None:
    info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
    info.create_system = 3  # Unix, so that unzip keeps the modes below
    info.external_attr = (0o100755 if executable else 0o100644) << 16
    info.compress_type = zipfile.ZIP_DEFLATED
    archive.writestr(info, data)


# --------------------------------------------------------------------------- the package's wheel


def package_files() -> dict[str, bytes]:
    """The files a wheel of this package holds, by their path in it: the grader package as it is
    installed here, with the exercises and solutions where a wheel keeps them (pyproject.toml).
    The exercise files are the stubs generated from the solutions, as a build packs them
    (tools/build_stubs.py), whatever a clone's working copies hold."""
    from ..exercises.stubs import fresh_stub

    files: dict[str, bytes] = {}
    for path in sorted(exercises.PACKAGE_DIR.rglob("*")):
        relative = path.relative_to(exercises.PACKAGE_DIR)
        if (not path.is_file() or "__pycache__" in relative.parts or path.suffix == ".pyc"
                or relative.parts[0] in ("_exercises", "_solutions")):
            continue
        files[f"grader/{relative.as_posix()}"] = path.read_bytes()
    for exercise in exercises.EXERCISES.values():
        files[f"grader/_exercises/{exercise.id}.py"] = fresh_stub(exercise).encode()
        files[f"grader/_exercises/{exercise.id}.md"] = exercise.instructions.read_bytes()
        files[f"grader/_exercises/hints/{exercise.id}.md"] = exercise.hints.read_bytes()
        files[f"grader/_solutions/{exercise.id}.py"] = exercise.solution.read_bytes()
    for written in sorted(exercises.SOLUTIONS_DIR.glob("*.md")):  # model answers of the written questions
        files[f"grader/_solutions/{written.name}"] = written.read_bytes()
    return files


def package_wheel() -> tuple[str, bytes]:
    """(file name, bytes) of a wheel of this package as installed here, from a wheel or a clone."""
    import io

    distribution = metadata.distribution(DISTRIBUTION)
    # An installed wheel or an editable install has METADATA; a clone's own egg-info (found first
    # when the clone is the current folder) has the same text as PKG-INFO.
    text = distribution.read_text("METADATA") or distribution.read_text("PKG-INFO")
    if not text or distribution.version is None:
        raise RuntimeError(f"the metadata of {DISTRIBUTION} cannot be read from {distribution!r}; "
                           "reinstall the package")
    version = distribution.version
    name = DISTRIBUTION.replace("-", "_")
    info = f"{name}-{version}.dist-info"
    files = package_files()
    files[f"{info}/METADATA"] = text.encode()
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: grader.integrations.autograder_zip\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    entry_points = distribution.read_text("entry_points.txt")
    if entry_points:
        files[f"{info}/entry_points.txt"] = entry_points.encode()
    files[f"{info}/top_level.txt"] = b"grader\n"
    record = [f"{path},sha256={_digest(data)},{len(data)}" for path, data in files.items()]
    record.append(f"{info}/RECORD,,")
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
        for path, data in files.items():
            _add(wheel, path, data)
    return f"{name}-{version}-py3-none-any.whl", buffer.getvalue()


def _digest(data: bytes) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


# --------------------------------------------------------------------------- pinned requirements


def pinned_requirements(distribution: str = DISTRIBUTION) -> list[str]:
    """``name==version`` for every package ``distribution`` needs, directly or not, as installed
    here (extras followed, environment markers evaluated here), sorted by name."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    pins: dict[str, str] = {}
    extras_seen: dict[str, set[str]] = {}
    queue: list[tuple[str, frozenset[str]]] = [(distribution, frozenset())]
    while queue:
        name, extras = queue.pop()
        for line in metadata.distribution(name).requires or []:
            requirement = Requirement(line)
            if requirement.marker is not None and not any(
                    requirement.marker.evaluate({"extra": extra}) for extra in ("", *extras)):
                continue
            key = canonicalize_name(requirement.name)
            wanted = set(requirement.extras)
            if key in pins and wanted <= extras_seen[key]:
                continue
            try:
                installed = metadata.distribution(requirement.name)
            except metadata.PackageNotFoundError:
                continue  # not installed here (another platform's need): pip resolves it there
            pins[key] = f"{installed.metadata['Name']}=={installed.version}"
            extras_seen[key] = extras_seen.get(key, set()) | wanted
            queue.append((requirement.name, frozenset(extras_seen[key])))
    pins.pop(canonicalize_name(distribution), None)
    return [pins[key] for key in sorted(pins)]
