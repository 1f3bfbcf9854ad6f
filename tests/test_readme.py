"""The README starts with the student, stays short, and its picture and links are current."""

from __future__ import annotations

import importlib.util
import re

import pytest

from grader import exercises
from grader.judging.declarations import declared_checks

ROOT = exercises.PROJECT_ROOT
README = (ROOT / "README.md").read_text(encoding="utf-8")
DOCS = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "CONTRIBUTING.md"]
STUDENT_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -e . && .venv/bin/grade exercise1"
TEST_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -e '.[test]' && .venv/bin/python -m pytest"


def load_picture_script():
    spec = importlib.util.spec_from_file_location("readme_picture", ROOT / "tools" / "readme_picture.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_readme_is_short():
    assert len(README.encode("utf-8")) < 12 * 1024


def test_the_readme_starts_with_the_two_commands_a_student_and_a_developer_run():
    first_section = README.split("\n## ", 2)[1]
    assert first_section.startswith("Two commands")
    assert STUDENT_COMMAND in first_section and TEST_COMMAND in first_section
    assert first_section.index(STUDENT_COMMAND) < first_section.index(TEST_COMMAND)
    assert TEST_COMMAND in (ROOT / ".ci" / "run").read_text(encoding="utf-8")  # CI runs what the README says


def test_the_readme_says_the_first_run_scores_zero_out_of_what_the_stub_can_earn():
    max_points = sum(check["points"] for check in declared_checks(exercises.get("exercise1")))
    assert "Your first run scores 0: the stub is empty." in README
    assert f"reports 0/{max_points:g}" in README


@pytest.mark.parametrize("words", ["grade list", "grade exercise1", "grade exercise1 --watch", "grade hint exercise1",
                                   "grade explain exercise3", "source .venv/bin/activate",
                                   "TF_CPP_MIN_LOG_LEVEL=3", "grade init", "grade server status",
                                   "grade --no-server"])
def test_the_readme_gives_the_student_loop(words):
    assert words in README


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


@pytest.mark.parametrize("document", [ROOT / "README.md", *DOCS], ids=lambda p: p.name)
def test_every_link_leads_to_a_file_and_heading_that_exist(document):
    text = document.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)\s]+)\)", text)
    assert links, f"{document.name} links nowhere (each guide links back to the README)"
    for link in links:
        if re.match(r"[a-z]+://", link):
            continue
        target, _, anchor = link.partition("#")
        path = (document.parent / target).resolve() if target else document
        assert path.is_file(), f"{document.name}: {link}"
        if anchor:
            headings = [_slug(line.lstrip("#")) for line in path.read_text(encoding="utf-8").splitlines()
                        if line.startswith("#")]
            assert anchor in headings, f"{document.name}: {link} (headings: {headings})"


def test_the_readme_links_every_guide():
    for document in DOCS:
        assert f"{document.relative_to(ROOT).as_posix()}" in README or f"]({document.name})" in (ROOT / "docs" / "instructors.md").read_text(), document.name


def test_the_readme_picture_is_current():
    """docs/report.svg is what tools/readme_picture.py draws now: a real grading, at a fixed seed and width."""
    script = load_picture_script()
    drawn = script.draw()
    assert "Two distinct LayerNormalization layers are applied" in drawn.replace("&#160;", " ")
    committed = script.PICTURE.read_text(encoding="utf-8")
    assert drawn == committed, "docs/report.svg is out of date: run python tools/readme_picture.py"
    text = committed.replace("&#160;", " ")
    assert "/tmp" not in text and str(ROOT) not in text  # no path of this machine
    assert "Versions" not in text and "Sandbox" not in text  # nor what differs between machines
