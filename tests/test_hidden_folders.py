"""Folders a grading may not read, even where they lie inside folders it must read.

An installed wheel carries the solutions inside the grader package
(``site-packages/grader/_solutions``), and the grading child must read the grader
package and site-packages. Landlock only adds rights, so the child's rules grant
the folders around a hidden one entry by entry.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import grader
from grader.sandbox import landlock
from grader.exercises import EXERCISES, EXERCISES_DIR, SOLUTIONS_DIR
from grader.sandbox.process import judging_folders, limits


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


def test_every_grading_hides_the_solutions_the_checks_and_the_folders_it_is_told_to():
    hidden = limits(10, 100, ["/srv/class/alice"])["hidden"]
    package = Path(grader.__file__).resolve().parent
    checks = [str(package / "exercises" / exercise_id / "checks.py") for exercise_id in EXERCISES]
    assert hidden == [os.path.realpath(SOLUTIONS_DIR), os.path.realpath(EXERCISES_DIR), str(package / "judge"),
                      *checks, "/srv/class/alice"]


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
    from grader.integrations.batch import Submission, private_folders

    found = [Submission("alice", Path("/opt/course/submitted/alice/exercise3/exercise3.ipynb"), "alice"),
             Submission("bob", Path("/opt/course/submitted/bob/exercise3/exercise3.ipynb"), "bob"),
             Submission("loose", Path("/srv/class/loose.py"))]
    assert private_folders(found) == ["/opt/course/submitted/alice/exercise3", "/opt/course",
                                      "/opt/course/submitted/bob/exercise3", "/srv/class"]


def test_a_class_is_hidden_whole_and_the_child_sees_no_roster(tmp_path):
    from grader.integrations.batch import survey

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
    assert limits(10, 100, job_private)["hidden"] == [os.path.realpath(SOLUTIONS_DIR), os.path.realpath(EXERCISES_DIR),
                                                      *judging_folders(), str(course.resolve()), str(elsewhere.resolve())]
