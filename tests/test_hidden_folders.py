"""What a grading may read: of the grader's installation exactly the modules it runs, and nothing of
the folders closed to it, even where they lie inside folders it must read.

The grading child must read the Python installation (site-packages, where a wheel puts the grader
package with its solutions inside) and the grader modules it runs (``grader.exercises.reads``).
Landlock only adds rights, so the child's rules grant the folders around a closed one entry by entry,
and the allowed grader files one by one. A real grading, in each mode, tries every file of the
installation and the project around it: what it can open is the allow-list, no more, no less.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import textwrap
import zlib
from pathlib import Path

import pytest

import grader
from grader.sandbox import landlock
from grader.exercises import EXERCISES, reads
from grader.protocol.limits import MAX_SOURCE_BYTES
from grader.sandbox.process import limits


def _tree(root: Path) -> dict[str, Path]:
    package = root / "site-packages" / "grader"
    (package / "_solutions").mkdir(parents=True)
    (package / "_exercises").mkdir()
    (package / "_solutions" / "exercise3.py").write_text("SOLUTION = 1\n", encoding="utf-8")
    (package / "_exercises" / "exercise3.py").write_text("STUB = 1\n", encoding="utf-8")
    (package / "checks.py").write_text("CHECKS = 1\n", encoding="utf-8")
    (root / "site-packages" / "numpy.py").write_text("NUMPY = 1\n", encoding="utf-8")
    (root / "site-packages" / "sneaky").symlink_to(package / "_solutions", target_is_directory=True)
    (root / "system").mkdir()
    (root / "system" / "tool.txt").write_text("tool\n", encoding="utf-8")
    (root / "system" / "class").mkdir()
    (root / "system" / "class" / "alice.py").write_text("ALICE = 1\n", encoding="utf-8")
    return {"site": root / "site-packages", "solutions": package / "_solutions", "system": root / "system",
            "class": root / "system" / "class"}


def test_rules_grant_all_around_a_hidden_folder_and_nothing_in_it(tmp_path):
    tree = _tree(tmp_path)
    rules = dict(landlock.read_rules([str(tree["system"])], [str(tree["site"])],
                                     [str(tree["solutions"]), str(tree["class"])]))
    granted = {Path(path) for path, rights in rules.items() if rights & landlock.READ_FILE}
    assert tree["site"] / "numpy.py" in granted and tree["site"] / "grader" / "checks.py" in granted
    assert tree["site"] / "grader" / "_exercises" in granted and tree["system"] / "tool.txt" in granted
    for path in granted:  # nothing granted holds, or leads into, a hidden folder
        real = Path(os.path.realpath(path))
        for hidden in (tree["solutions"], tree["class"]):
            assert real != hidden and hidden not in real.parents and real not in hidden.parents
    # the Python folders on the way stay listable, a system folder on the way does not
    assert rules[os.path.realpath(tree["site"])] == landlock.READ_DIR
    assert rules[os.path.realpath(tree["site"] / "grader")] == landlock.READ_DIR
    assert str(tree["system"]) not in rules and os.path.realpath(tree["system"]) not in rules


def test_a_hidden_folder_with_hidden_folders_inside_stays_hidden_whole(tmp_path):
    # an nbgrader course hides itself and each submission's folder beneath it
    tree = _tree(tmp_path)
    course = tree["system"] / "course"
    (course / "submitted" / "bob").mkdir(parents=True)
    (course / "source").mkdir()
    (course / "source" / "exercise3.ipynb").write_text("{}", encoding="utf-8")
    (course / "gradebook.db").write_text("", encoding="utf-8")
    rules = landlock.read_rules([str(tree["system"])], [], [str(course), str(course / "submitted" / "bob")])
    granted = [Path(os.path.realpath(path)) for path, _ in rules]
    assert tree["system"] / "tool.txt" in granted
    assert not [path for path in granted if path == course or course in path.parents], granted


def test_a_folder_without_hidden_ones_is_granted_whole(tmp_path):
    tree = _tree(tmp_path)
    rules = landlock.read_rules([str(tree["system"])], [str(tree["site"])], [str(tmp_path / "elsewhere")])
    assert rules == [(str(tree["system"]), landlock.READ_RIGHTS), (str(tree["site"]), landlock.READ_RIGHTS)]


def test_a_python_folder_inside_a_hidden_one_stays_readable(tmp_path):
    tree = _tree(tmp_path)
    rules = landlock.read_rules([], [str(tree["site"])], [str(tmp_path)])
    assert rules == [(str(tree["site"]), landlock.READ_RIGHTS)]


def test_every_grading_closes_the_package_the_project_and_the_folders_it_is_told_to():
    policy = reads.policy()
    closed = limits(10, 100, ["/srv/class/alice"], policy)
    package = Path(grader.__file__).resolve().parent
    assert str(package) in closed["hidden"] and "/srv/class/alice" in closed["hidden"]
    if not reads.INSTALLED_FROM_WHEEL:
        assert str(reads.PROJECT_ROOT) in closed["hidden"]  # a clone: its solutions, tests, history, builds
    assert closed["grant"] == list(policy["grant"])
    assert limits(10, 100, [])["grant"] == [] and limits(10, 100, [])["hidden"] == [str(package)]


def test_the_allow_list_is_what_a_grading_process_imports_and_never_the_judge_or_a_check():
    modules = set(reads.child_modules())
    assert {"grader.child.__main__", "grader.child.worker", "grader.sandbox.confine", "grader.protocol.wire",
            "grader.explain.phases"} <= modules
    assert {f"grader.exercises.{e}.{part}" for e in EXERCISES for part in ("probe", "job", "spec")} <= modules
    assert not [m for m in modules if m.startswith(("grader.judge", "grader.integrations", "grader.cli"))
                or m.endswith((".checks", ".reference")) or m in ("grader.api", "grader.report", "grader.causes")]
    assert "grader.in_notebook" not in modules  # grader.check: the notebook's, imported when asked for
    granted = {Path(path) for path in reads.readable_files()}
    package = Path(grader.__file__).resolve().parent
    assert all(path.is_relative_to(package) for path in granted)
    assert not [path for path in granted if path.suffix == ".pyc" and path.parent.name != "__pycache__"]
    # a module's bytecode is granted beside its source, never a hidden module's bytecode in the same folder
    compiled = [path for path in granted if path.suffix == ".pyc"]
    assert all(path.name.split(".")[0] in {p.stem for p in granted if p.suffix == ".py" and p.parent == path.parent.parent}
               for path in compiled)


def test_grants_open_each_file_alone_and_list_its_folder(tmp_path):
    folder = tmp_path / "package"
    folder.mkdir()
    (folder / "probe.py").write_text("", encoding="utf-8")
    rules = landlock.grant_rules([str(folder / "probe.py"), str(folder / "missing.py")])
    assert rules == [(str(folder / "probe.py"), landlock.READ_FILE | landlock.EXECUTE),
                     (str(folder), landlock.READ_DIR)]


def test_a_python_folder_inside_a_closed_one_is_granted_around_what_is_closed_beneath_it(tmp_path):
    """A virtual environment inside a clone: its libraries readable, the distribution's metadata in it not."""
    site = tmp_path / "clone" / ".venv" / "site-packages"
    (site / "numpy").mkdir(parents=True)
    (site / "transformer_exercises-0.1.0.dist-info").mkdir()
    rules = dict(landlock.read_rules([], [str(site)], [str(tmp_path / "clone"),
                                                       str(site / "transformer_exercises-0.1.0.dist-info")]))
    assert rules[os.path.realpath(site / "numpy")] == landlock.READ_RIGHTS
    assert os.path.realpath(site / "transformer_exercises-0.1.0.dist-info") not in rules


PROBE = textwrap.dedent("""
    import json, os, sys
    from grader.sandbox import landlock
    tree = json.loads(sys.argv[1])
    landlock.SYSTEM_READ_PATHS += (tree["system"],)  # standing in for /opt
    state = landlock.restrict(tree["scratch"], [tree["site"]], [tree["solutions"], tree["class"]])
    if not state.get("applied"):
        print(json.dumps({"skip": state.get("reason")}))
        raise SystemExit
    def attempt(path, listing=False):
        try:
            if listing:
                os.listdir(path)
            else:
                open(path).read()
            return "read"
        except PermissionError:
            return "refused"
    print(json.dumps({
        "solution": attempt(tree["solutions"] + "/exercise3.py"),
        "through_link": attempt(tree["site"] + "/sneaky/exercise3.py"),
        "classmate": attempt(tree["class"] + "/alice.py"),
        "package_file": attempt(tree["site"] + "/grader/checks.py"),
        "stub": attempt(tree["site"] + "/grader/_exercises/exercise3.py"),
        "site_listing": attempt(tree["site"], listing=True),
        "package_listing": attempt(tree["site"] + "/grader", listing=True),
        "system_file": attempt(tree["system"] + "/tool.txt"),
    }))
""")


def test_under_landlock_the_hidden_folders_cannot_be_read(tmp_path):
    if landlock.abi_version() < 0:
        pytest.skip("Landlock is not available on this kernel")
    tree = _tree(tmp_path / "tree")
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    paths = {name: str(path) for name, path in tree.items()} | {"scratch": str(scratch)}
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(paths)], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    if "skip" in seen:
        pytest.skip(seen["skip"])
    assert seen == {"solution": "refused", "through_link": "refused", "classmate": "refused",
                    "package_file": "read", "stub": "read", "site_listing": "read", "package_listing": "read",
                    "system_file": "read"}


def test_a_batch_hides_each_submissions_folder_and_an_nbgrader_course_whole():
    from grader.integrations.discovery import Submission, private_folders

    found = [Submission("alice", Path("/opt/course/submitted/alice/exercise3/exercise3.ipynb"), "alice"),
             Submission("bob", Path("/opt/course/submitted/bob/exercise3/exercise3.ipynb"), "bob"),
             Submission("loose", Path("/srv/class/loose.py"))]
    assert private_folders(found) == ["/opt/course/submitted/alice/exercise3", "/opt/course",
                                      "/opt/course/submitted/bob/exercise3", "/srv/class"]


def test_a_class_is_hidden_whole_and_the_child_sees_no_roster(tmp_path):
    from grader.integrations.discovery import survey

    course = tmp_path / "course"
    for student in ("alice", "bob"):
        (course / "submitted" / student / "exercise3").mkdir(parents=True)
        (course / "submitted" / student / "exercise3" / "exercise3.ipynb").write_text("{}", encoding="utf-8")
    (course / "submitted" / "carol" / "exercise3").mkdir(parents=True)  # nothing handed in
    (course / "source").mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "answer.ipynb").write_text("{}", encoding="utf-8")
    (course / "submitted" / "mallory" / "exercise3").mkdir(parents=True)
    (course / "submitted" / "mallory" / "exercise3" / "exercise3.ipynb").symlink_to(elsewhere / "answer.ipynb")
    found = survey([course], "exercise3")
    private = found.private()
    assert str(course.resolve()) in private and str(elsewhere.resolve()) in private
    job_private = [*private, str(found.submissions[0].path.parent)]
    policy = reads.policy()
    assert limits(10, 100, job_private, policy)["hidden"] == [*policy["closed"], str(course.resolve()),
                                                              str(elsewhere.resolve())]


# --------------------------------------------------------------------------- inside a real grading

# A folder holding no granted file, no folder above a granted one, and more files than this (another
# Python environment in a clone, a clone's object store) is tried by a sample: Landlock and the
# grader's own rules decide a file by the folders above it, so a sample of every folder of it, to
# SAMPLED_DEPTH below, tries every rule that could reach it; all of it would not fit in a submission.
SAMPLED_ABOVE = 400
SAMPLED_DEPTH = 6
SAMPLED_PER_FOLDER = 2


def _installation_files() -> list[str]:
    """Every file of the grader's installation and of what is closed around it (a clone's files, its
    history included; the distribution's metadata), but the Python installation inside it (a virtual
    environment in the clone), which a grading reads by design; a large folder that nothing granted
    lies in is sampled (``SAMPLED_ABOVE``)."""
    policy = reads.policy()
    python = {os.path.realpath(p) for p in landlock.python_paths()}
    closed = {os.path.realpath(p) for p in policy["closed"]}
    granted = {os.path.realpath(p) for p in policy["grant"]}
    above_granted = {str(parent) for path in granted for parent in Path(path).parents}
    found = set()
    for root in closed:
        if os.path.isfile(root):
            found.add(root)
            continue
        for base, folders, files in os.walk(root):
            folders[:] = [f for f in folders if os.path.realpath(os.path.join(base, f)) not in python - closed]
            real = os.path.realpath(base)
            if real not in above_granted and real not in granted and _count_files(base) > SAMPLED_ABOVE:
                found.update(_sample(base))
                folders[:] = []
                continue
            found.update(os.path.join(base, name) for name in files)
    return sorted(found)


def _count_files(folder: str) -> int:
    return sum(len(files) for _base, _folders, files in os.walk(folder))


def _sample(folder: str) -> list[str]:
    """The first files of every folder down to ``SAMPLED_DEPTH`` below ``folder``."""
    chosen = []
    for base, folders, files in os.walk(folder):
        folders.sort()
        if os.path.relpath(base, folder).count(os.sep) + (base != folder) >= SAMPLED_DEPTH:
            folders[:] = []
        chosen += [os.path.join(base, name) for name in sorted(files)[:SAMPLED_PER_FOLDER]]
    return chosen


ENUMERATOR = """
import base64 as _base64, json as _json, zlib as _zlib
_PATHS = _json.loads(_zlib.decompress(_base64.b64decode({paths!r})))
_GRANTED = set(_json.loads({granted!r}))
_opened = set()
for _path in _PATHS:
    try:
        with open(_path, "rb") as _handle:
            _handle.read(1)
        _opened.add(_path)
    except OSError:
        pass
_unexpected = sorted(_opened - _GRANTED)
_missing = sorted(p for p in _GRANTED - _opened if p in set(_PATHS))
raise RuntimeError(f"READS tried={{len(_PATHS)}} opened={{len(_opened)}} unexpected={{len(_unexpected)}} "
                   f"missing={{len(_missing)}} {{_unexpected[:3]}} {{_missing[:3]}}")
"""


def _enumerating_source(only_in: str | None = None) -> tuple[str, int]:
    """A submission that tries every file and raises what it opened; with ``only_in``, it does so only
    in a process that has imported that module (and is otherwise the correct encoder)."""
    paths = _installation_files()
    granted = [os.path.realpath(p) for p in reads.policy()["grant"]]
    packed = base64.b64encode(zlib.compress(json.dumps(paths).encode(), 9)).decode()
    enumerator = ENUMERATOR.format(paths=packed, granted=json.dumps(granted))
    assert len(enumerator.encode()) < MAX_SOURCE_BYTES // 2, (  # room for the solution beside it
        f"{len(paths)} paths make a submission of {len(enumerator.encode())} bytes")
    if only_in is None:
        return enumerator, len(paths)
    guarded = f"import sys as _sys\nif {only_in!r} in _sys.modules:\n" + "".join(
        f"    {line}\n" for line in enumerator.strip("\n").splitlines())
    return guarded + "\n" + EXERCISES["exercise3"].solution.read_text(encoding="utf-8"), len(paths)


def _assert_reads_only_the_allow_list(message: str, tried: int) -> None:
    if landlock.abi_version() < 0:
        pytest.skip("Landlock is not available on this kernel")
    assert f"READS tried={tried} " in message, message[:800]
    assert "unexpected=0 missing=0" in message, message[:800]


@pytest.mark.parametrize("warm", [False, True], ids=["fresh", "warm"])
def test_a_grading_opens_exactly_the_allow_list_of_the_installation(tmp_path, warm):
    """Every file of the installed grader and the project around it, tried from inside a grading (a
    fresh `grade`, and a fork of the batch's warm worker): it opens exactly the granted ones."""
    from grader.api import Grading, Settings

    from .conftest import warm_runner

    source, tried = _enumerating_source()
    path = tmp_path / "exercise3.py"
    path.write_text(source, encoding="utf-8")
    runner = warm_runner() if warm else None
    grading = Grading("exercise3", path, Settings(), **({"runner": runner} if warm else {}))
    verdict = grading.finish()
    assert verdict.status == "error"
    _assert_reads_only_the_allow_list(verdict.error, tried)


@pytest.mark.slow
def test_a_grading_on_jax_opens_exactly_the_allow_list(tmp_path):
    from grader import backends
    from grader.api import Settings, grade

    if not backends.installed("jax"):
        pytest.skip("JAX is not installed here (pip install '.[jax]')")
    source, tried = _enumerating_source()
    path = tmp_path / "exercise3.py"
    path.write_text(source, encoding="utf-8")
    verdict = grade("exercise3", path, Settings(backend="jax", timeout=900))
    assert verdict.status == "error"
    _assert_reads_only_the_allow_list(verdict.error, tried)


@pytest.mark.slow
def test_the_experiments_of_grade_explain_open_exactly_the_allow_list(tmp_path):
    """`grade explain` runs a student's encoder beside the reference one: the same allow-list."""
    from grader.api import Settings
    from grader.explain.run import Plan, explain

    source, tried = _enumerating_source(only_in="grader.explain.phases")  # graded as correct, then enumerates
    path = tmp_path / "exercise3.py"
    path.write_text(source, encoding="utf-8")
    explanation = explain("exercise3", path, Settings(seed=5, timeout=900), Plan(steps=2, train_count=16,
                                                                                  test_count=8))
    assert explanation.context["grading_status"] == "passed"
    said = " ".join([explanation.error or "", *explanation.problems, explanation.subject_reason])
    _assert_reads_only_the_allow_list(said, tried)
