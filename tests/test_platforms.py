"""Gradescope and PrairieLearn results: the spec's fields, the report's order, one score everywhere."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pytest

from grader import exercises
from grader.integrations import platforms
from grader.integrations.outputs import Outputs, Result, gradescope
from grader.integrations.discovery import Submission
from grader.integrations.platforms import (
    DEFAULT_VISIBILITY, SubmissionNotFound, find_submission, gradescope_results, gradescope_visibility,
    markdown_text, prairielearn_results, write_json,
)
from grader.protocol import text
from grader.verdict import CheckResult, error_verdict, summarise

CONTEXT = {"title": "The Transformer encoder", "seed": 11, "timeout": 120.0, "memory_mb": 4096,
           "python": "3.11.7", "seconds": 4.6, "output": "hello from the student"}
GRADESCOPE_TOP = {"score", "execution_time", "output", "output_format", "test_output_format", "test_name_format",
                  "visibility", "stdout_visibility", "extra_data", "tests"}
GRADESCOPE_TEST = {"score", "max_score", "status", "name", "name_format", "number", "output", "output_format",
                   "tags", "visibility", "extra_data"}
GRADESCOPE_FORMATS = {"text", "html", "simple_format", "md", "ansi"}
PRAIRIELEARN_TEST = {"name", "description", "points", "max_points", "message", "output"}


def check(id, status, points=1.0, message=""):
    return CheckResult(id, f"title of {id}", id.split(".")[0], status, points if status == "passed" else 0.0,
                       points, message)


@pytest.fixture
def verdict():
    """Checks listed out of the report's order: the report groups them by topic."""
    return summarise("exercise3", "/work/ex.py", [
        check("forward.post_norm", "failed", 3, "Observed: norm(x) + x.\nExpected: norm(x + f(x)).\n"
                                                "Why it matters: post-norm, as in the book."),
        check("api.constructor", "passed"),
        check("config.from_config", "timeout", 1, "Not checked: the grading time limit ran out."),
        check("weights.two_norms", "failed", 2, "Observed: super().__init__(**kwargs) <missing>.\n"
                                                "Expected: two_norms.\nWhy it matters: gamma & beta."),
        check("api.output_shape", "passed"),
    ], CONTEXT)


def assert_gradescope_spec(results: dict):
    assert set(results) <= GRADESCOPE_TOP
    assert results["output_format"] in GRADESCOPE_FORMATS and results["test_output_format"] in GRADESCOPE_FORMATS
    assert results["visibility"] in ("visible", "hidden", "after_due_date", "after_published")
    for test in results["tests"]:
        assert set(test) <= GRADESCOPE_TEST
        assert {"name", "score", "max_score", "status", "output"} <= set(test)
        assert test["status"] in ("passed", "failed") and 0 <= test["score"] <= test["max_score"]
        assert test["visibility"] in ("visible", "hidden", "after_due_date", "after_published")
    json.dumps(results)  # plain JSON


def test_gradescope_tests_follow_the_report_order_with_points_and_the_score(verdict):
    results = gradescope_results(verdict)
    assert_gradescope_spec(results)
    assert results["score"] == verdict.score == 2.0
    loading, *checks = results["tests"]
    assert [t["extra_data"]["id"] for t in checks] == [
        "api.constructor", "api.output_shape", "weights.two_norms", "config.from_config", "forward.post_norm"]
    assert not any("number" in t for t in results["tests"])  # Gradescope numbers them in this order
    assert [t["tags"] for t in checks][:3] == [["api"], ["api"], ["weights"]]
    assert sum(t["score"] for t in results["tests"]) == results["score"]
    assert sum(t["max_score"] for t in results["tests"]) == verdict.max_score
    timeout = checks[3]
    assert timeout["status"] == "failed" and timeout["extra_data"]["status"] == "timeout"
    assert "Timed out" in timeout["output"] and "time limit ran out" in timeout["output"]
    assert loading["status"] == "passed" and loading["max_score"] == 0 and "TransformerEncoder" in loading["output"]


def test_gradescope_fields_of_the_instructor_issue(verdict):
    results = gradescope_results(verdict, execution_time=12.6)
    assert results["execution_time"] == 13
    assert results["output_format"] == "md" and results["test_output_format"] == "md"
    assert all(t["output_format"] == "md" for t in results["tests"])
    assert gradescope_results(verdict)["execution_time"] == 5  # the grading process's own seconds
    assert results["stdout_visibility"] == "hidden"
    assert results["extra_data"] == {"exercise": "exercise3", "status": "failed", "max_score": 8.0, "seed": 11,
                                     "backend": "tensorflow"}


@pytest.mark.parametrize("visibility", ["visible", "hidden", "after_due_date", "after_published"])
def test_gradescope_visibility_applies_to_the_checks_and_the_result(verdict, visibility):
    results = gradescope_results(verdict, visibility)
    assert results["visibility"] == visibility
    loading, *checks = results["tests"]
    assert all(t["visibility"] == visibility for t in checks)
    assert loading["visibility"] == "visible"  # whether the file could be graded is always shown


def test_gradescope_default_visibility_is_after_the_due_date(verdict):
    assert DEFAULT_VISIBILITY == "after_due_date"
    assert gradescope_results(verdict)["visibility"] == "after_due_date"
    with pytest.raises(ValueError, match="unknown Gradescope visibility"):
        gradescope_results(verdict, "sometimes")


def test_gradescope_messages_are_markdown_that_reads_as_the_text(verdict):
    output = gradescope_results(verdict)["tests"][3]["output"]  # weights.two_norms
    assert "**Observed:**" in output and "**Expected:**" in output and "**Why it matters:**" in output
    assert r"super().\_\_init\_\_(\*\*kwargs) &lt;missing&gt;" in output
    assert r"two\_norms" in output and "gamma &amp; beta" in output
    assert output.count("\n\n") == 3  # status, observed, expected, why: one paragraph each


@pytest.mark.parametrize("text, markdown", [
    ("a * b_c", r"a \* b\_c"),
    ("replace `raise NotImplementedError()` here", "replace `raise NotImplementedError()` here"),
    ("`**kwargs` and **kwargs", r"`**kwargs` and \*\*kwargs"),
    ("# not a heading\n- not a list\n1. nor this", "\\# not a heading  \n\\- not a list  \n1\\. nor this"),
    ("<b>[x]</b> & y", r"&lt;b&gt;\[x\]&lt;/b&gt; &amp; y"),
])
def test_markdown_text_escapes_what_markdown_would_change(text, markdown):
    assert markdown_text(text) == markdown


def test_gradescope_result_of_a_submission_that_could_not_be_graded():
    verdict = error_verdict("exercise3", "/work/bad.py", "Your file has a SyntaxError at line 4: x_1 *", 23.0, CONTEXT)
    results = gradescope_results(verdict, "hidden")
    assert_gradescope_spec(results)
    assert results["score"] == 0
    (test,) = results["tests"]
    assert test["status"] == "failed" and test["score"] == 0 and test["max_score"] == 23.0
    assert test["visibility"] == "visible" and r"SyntaxError at line 4: x\_1 \*" in test["output"]
    assert "could not be graded" in results["output"] and "hello from the student" in results["output"]


def test_a_syntax_error_s_caret_stays_under_its_column_in_a_code_block_no_student_text_can_end():
    """Gradescope's Markdown folds the spaces before a caret: the lines the error quotes of the file go
    in a fenced code block, its fence longer than any run of backticks they hold, within the same four
    lines of 160 characters."""
    from grader.integrations.platforms import error_markdown
    from grader.submission import Source
    from grader.ungradable import syntax_problem

    for code in ("x = '```' +", "y = '`````' + ", "z = (1 +* " + "w" * 400 + ")"):
        error = syntax_problem(code + "\n", Path("bad.py"), Source(code + "\n"))
        quoted, caret = error.splitlines()[1:3]
        verdict = error_verdict("exercise3", "/work/bad.py", error, 23.0, CONTEXT)
        results = gradescope_results(verdict, "hidden")
        (test,) = results["tests"]
        for markdown in (test["output"], results["output"]):
            lines = markdown.splitlines()
            opening = next(i for i, line in enumerate(lines) if line.startswith("```"))
            fence = lines[opening].removesuffix("text")
            assert len(fence) > max((len(run) for run in re.findall("`+", error)), default=0)
            closing = lines.index(fence, opening + 1)
            block = lines[opening + 1:closing]
            shown_code = text.shown(error).splitlines()[1:3]
            assert block == [line[4:] for line in shown_code]
            assert block[1].index("^") == len(caret) - 5  # under its column, as the error quotes it
            assert all(len(line) <= text.VISIBLE_LINE_CHARS for line in block)
    assert error_markdown("Why:\n    a\n    ^\nmore") == "Why:\n\n```text\na\n^\n```\n\nmore"


def test_the_always_visible_test_quotes_only_a_few_short_lines_of_the_reason():
    """A submission can make its own error say anything (a file it read, line by line): the test
    that every student sees, whatever the visibility, gives the reason in a few short lines."""
    leaked = "\n".join(f"secret line {i} " + "x" * 500 for i in range(40))
    verdict = error_verdict("exercise3", "/work/bad.py", "Importing your file raised an error:\n" + leaked, 23.0,
                            CONTEXT)
    (test,) = gradescope_results(verdict, "hidden")["tests"]
    lines = test["output"].splitlines()
    assert len(lines) <= text.VISIBLE_LINES + 1 and all(len(line) <= 2 * text.VISIBLE_LINE_CHARS for line in lines)
    assert "secret line 2 " in test["output"] and "secret line 3 " not in test["output"]
    assert "more line(s)" in lines[-1]
    assert len(prairielearn_results(verdict)["format_errors"][0].splitlines()) <= text.VISIBLE_LINES + 1


def test_prairielearn_results_carry_the_same_score_as_a_fraction(verdict):
    results = prairielearn_results(verdict)
    assert results["gradable"] is True
    assert results["score"] == pytest.approx(verdict.score / verdict.max_score) == 0.25
    assert results["message"].startswith("Score 2/8: 2 of 5 checks passed")
    assert results["output"] == "hello from the student"
    assert [t["description"].split()[0] for t in results["tests"]][:3] == [
        "api.constructor", "api.output_shape", "weights.two_norms"]
    for test in results["tests"]:
        assert set(test) == PRAIRIELEARN_TEST
        assert 0 <= test["points"] <= test["max_points"]
    assert results["tests"][3]["output"] == "Timed out"
    assert "Observed: norm(x) + x." in results["tests"][4]["message"]


def test_prairielearn_marks_an_ungradable_submission_without_penalty():
    verdict = error_verdict("exercise3", "/work/bad.py", "Your file has no TransformerEncoder.", 23.0, CONTEXT)
    results = prairielearn_results(verdict)
    assert results["gradable"] is False and results["score"] == 0.0 and results["tests"] == []
    assert results["format_errors"] == ["Your file has no TransformerEncoder."]


def test_batch_writes_gradescope_results_with_the_visibility_chosen(verdict, tmp_path):
    assert gradescope(verdict) == gradescope_results(verdict)
    with gradescope_visibility("visible"):
        outputs = Outputs(tmp_path)
        outputs.write(Result(Submission("alice", Path("/work/ex.py")), verdict, 3.0))
        outputs.close()
    written = json.loads((tmp_path / "gradescope" / "alice" / "results.json").read_text())
    assert written["visibility"] == "visible" and written["score"] == verdict.score
    assert gradescope(verdict)["visibility"] == DEFAULT_VISIBILITY  # only within the block


def test_write_json_leaves_no_temporary_file(tmp_path):
    target = write_json(tmp_path / "results" / "results.json", {"score": 1.0})
    assert json.loads(target.read_text()) == {"score": 1.0}
    assert [p.name for p in target.parent.iterdir()] == ["results.json"]


# --------------------------------------------------------------------------- finding the submission


def touch(folder: Path, *names: str) -> None:
    for name in names:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text("x = 1\n")


def test_the_only_file_is_the_submission_whatever_its_name(tmp_path):
    touch(tmp_path, "my_encoder.py", "README.md", ".ipynb_checkpoints/my_encoder-checkpoint.py")
    assert find_submission(tmp_path, "exercise3") == tmp_path / "my_encoder.py"


def test_among_several_files_the_one_named_after_the_exercise(tmp_path):
    touch(tmp_path, "helpers.py", "repo/exercise3.ipynb", "__pycache__/x.py")
    assert find_submission(tmp_path, "exercise3") == tmp_path / "repo" / "exercise3.ipynb"


@pytest.mark.parametrize("names, says", [
    ((), "No .py file or .ipynb notebook was submitted"),
    (("notes.txt",), "holds notes.txt"),
    (("a.py", "b.py"), "Several files could be the submission (a.py, b.py)"),
    (("exercise3.py", "exercise3.ipynb"), "name the one to grade exercise3.py"),
])
def test_no_single_submission_is_explained(tmp_path, names, says):
    touch(tmp_path, *names)
    with pytest.raises(SubmissionNotFound, match=re.escape(says)):
        find_submission(tmp_path, "exercise3")


# --------------------------------------------------------------------------- the command line

ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", COLUMNS="100", GRADE_STATE_DIR=tempfile.mkdtemp())


def grade(*args, env=ENV, cwd=None):
    return subprocess.run([sys.executable, "-m", "grader", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=600)


@pytest.mark.parametrize("args, says", [
    (["exercise3", "--gradescope-visibility", "visible"], "--gradescope-visibility applies to --gradescope-results"),
    (["exercise3", "--watch", "--prairielearn-results", "r.json"], "--watch cannot be combined"),
    (["exercise3", "--gradescope-results", "r.json", "--gradescope-visibility", "soon"], "invalid choice: 'soon'"),
    (["gradescope-autograder", "exercise3", "--out", "a.tar"], "--out must name a .zip file"),
    (["gradescope-autograder", "exercise9", "--out", "a.zip"], "unknown exercise 'exercise9'"),
])
def test_bad_platform_arguments_are_explained(args, says, tmp_path):
    result = grade(*args, cwd=tmp_path)
    assert result.returncode == 2 and says in result.stderr
    assert not (tmp_path / "r.json").exists()


def test_an_empty_submission_folder_still_gets_results_files(tmp_path):
    (tmp_path / "submission").mkdir()
    result = grade("exercise3", "--submission", str(tmp_path / "submission"), "--gradescope-results",
                   str(tmp_path / "gs.json"), "--prairielearn-results", str(tmp_path / "pl.json"))
    assert result.returncode == 2
    assert "No .py file or .ipynb notebook was submitted" in result.stdout
    gs = json.loads((tmp_path / "gs.json").read_text())
    pl = json.loads((tmp_path / "pl.json").read_text())
    assert gs["score"] == 0 and gs["tests"][0]["status"] == "failed" and gs["tests"][0]["max_score"] == 23.0
    assert pl["gradable"] is False and "No .py file" in pl["format_errors"][0]


MISTAKE = exercises.get("exercise3").solution.read_text(encoding="utf-8").replace(
    "self.layernorm_2 = layers.LayerNormalization()", "self.layernorm_2 = self.layernorm_1")


@pytest.fixture(scope="module")
def autograder(tmp_path_factory):
    """The zip `grade gradescope-autograder` builds, and its entries with their Unix modes."""
    out = tmp_path_factory.mktemp("zip") / "autograder.zip"
    result = grade("gradescope-autograder", "exercise3", "--out", str(out), "--visibility", "after_published")
    assert result.returncode == 0, result.stderr
    assert str(out) in result.stdout
    # its last lines say what students see before the due date, and how to choose otherwise
    assert result.stdout.splitlines()[-2:] == [
        "Test visibility: after_published. Before the due date, students see only whether their file could be "
        "graded, no score and no check; every check once you publish the grades.",
        "To change it, build the zip again with --visibility (visible, after_due_date, hidden) and upload it: "
        f"grade gradescope-autograder exercise3 --out {out} --force --visibility visible"]
    with zipfile.ZipFile(out) as archive:
        entries = {info.filename: (archive.read(info), info.external_attr >> 16) for info in archive.infolist()}
    return out, entries


def test_the_autograder_zip_has_what_gradescope_wants_at_its_root(autograder):
    _, entries = autograder
    assert {"setup.sh", "run_autograder", "requirements.txt", "README.md"} <= set(entries)
    assert all("/" not in name for name in entries)  # files at the root, not in a folder
    assert entries["setup.sh"][1] & 0o111 and entries["run_autograder"][1] & 0o111
    assert entries["setup.sh"][0].startswith(b"#!/usr/bin/env bash\n")
    assert entries["run_autograder"][0].startswith(b"#!/usr/bin/env bash\n")
    (wheel,) = [name for name in entries if name.endswith(".whl")]
    assert wheel.startswith("transformer_exercises-") and wheel.encode() in entries["setup.sh"][0]
    with zipfile.ZipFile(io.BytesIO(entries[wheel][0])) as archive:
        names = set(archive.namelist())
        (metadata_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        described = archive.read(metadata_name).decode()
    assert "grader/_solutions/exercise3.py" in names and "grader/_exercises/hints/exercise3.md" in names
    assert "Name: transformer-exercises" in described and "\nVersion: " in described
    assert "Requires-Dist: tensorflow" in described and "Requires-Python: " in described
    assert any(n.endswith(".dist-info/RECORD") for n in names)
    assert any(n.endswith(".dist-info/entry_points.txt") for n in names)


def test_the_autograder_pins_every_dependency_as_installed_here(autograder):
    from importlib import metadata

    _, entries = autograder
    pins = dict(line.split("==") for line in entries["requirements.txt"][0].decode().split())
    assert pins["tensorflow"] == metadata.version("tensorflow")
    assert pins["keras"] == metadata.version("keras") and pins["scipy"] == metadata.version("scipy")
    assert "numpy" in pins and "rich" in pins and "absl-py" in pins  # tensorflow's own, followed
    # Gradescope grades .py files and notebooks with the student's install: no nbgrader, no Jupyter
    assert not {"nbgrader", "nbformat", "jupyterlab", "jupyter_core"} & {n.replace("-", "_") for n in pins}
    assert "transformer-exercises" not in pins  # the wheel in the zip is the package itself


def lay_out(autograder, root: Path, submission: dict[str, str]) -> Path:
    """The zip unpacked as Gradescope unpacks it, under ``root`` instead of /autograder."""
    archive_path, entries = autograder
    (root / "source").mkdir(parents=True)
    with zipfile.ZipFile(archive_path) as archive:
        archive.extractall(root / "source")
    for name, (_, mode) in entries.items():
        os.chmod(root / "source" / name, mode & 0o777)
    shutil.copy2(root / "source" / "run_autograder", root / "run_autograder")
    (root / "submission").mkdir()
    for name, source in submission.items():
        (root / "submission" / name).write_text(source, encoding="utf-8")
    return root


def run_autograder(root: Path, path_dirs: list[str], env_extra: dict | None = None):
    env = dict(ENV, AUTOGRADER_ROOT=str(root), PATH=os.pathsep.join(path_dirs), **(env_extra or {}))
    result = subprocess.run([str(root / "run_autograder")], capture_output=True, text=True, env=env, cwd=root,
                            timeout=900)
    return result, json.loads((root / "results" / "results.json").read_text())


VENV_BIN = str(Path(sys.executable).parent)
SYSTEM_PATH = ["/usr/local/bin", "/usr/bin", "/bin"]


def test_run_autograder_grades_as_grade_json_does(autograder, tmp_path):
    """The installed package's `grade` on PATH, as setup.sh leaves it; the same seed, the same score."""
    root = lay_out(autograder, tmp_path / "autograder", {"encoder.py": MISTAKE})
    seeded = {"GRADE_SEED": "7"}
    result, results = run_autograder(root, [VENV_BIN, *SYSTEM_PATH], seeded)
    assert result.returncode == 0, result.stderr
    assert_gradescope_spec(results)
    alone = grade("exercise3", "--submission", str(root / "submission" / "encoder.py"), "--json",
                  env=dict(ENV, **seeded))
    verdict = json.loads(alone.stdout)
    assert results["score"] == verdict["score"] < verdict["max_score"]
    assert f"Score {verdict['score']:g}/23" in result.stdout  # the report, for Gradescope's instructor-only log
    assert results["extra_data"]["seed"] == 7
    assert results["visibility"] == "after_published"
    failed = {t["extra_data"]["id"] for t in results["tests"][1:] if t["status"] == "failed"}
    assert failed == {c["id"] for c in verdict["checks"] if c["status"] != "passed"}
    assert 0 <= results["execution_time"] < 900


def test_run_autograder_grades_a_notebook(autograder, tmp_path):
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("My encoder"),
                      nbformat.v4.new_code_cell(exercises.get("exercise3").solution.read_text(encoding="utf-8"))]
    root = lay_out(autograder, tmp_path / "autograder", {"exercise3.ipynb": nbformat.writes(notebook),
                                                         "helpers.py": "x = 1\n"})
    result, results = run_autograder(root, [VENV_BIN, *SYSTEM_PATH])
    assert result.returncode == 0, result.stderr
    assert results["score"] == 23.0 and all(t["status"] == "passed" for t in results["tests"])


def test_run_autograder_without_grade_on_path_uses_python3_dash_m_grader(autograder, tmp_path):
    """Nothing to grade here, so no TensorFlow: this checks the fallback and the error result."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "python3").write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    (bin_dir / "python3").chmod(0o755)
    root = lay_out(autograder, tmp_path / "autograder", {"notes.txt": "no code"})
    result, results = run_autograder(root, [str(bin_dir), *SYSTEM_PATH])
    assert result.returncode == 0, result.stderr
    assert results["score"] == 0 and results["tests"][0]["visibility"] == "visible"
    assert "holds notes.txt" in results["tests"][0]["output"]


def prairielearn(*args, root: Path, env=ENV):
    return subprocess.run([sys.executable, "-m", "grader.integrations.prairielearn", *args], capture_output=True, text=True,
                          env=dict(env, PRAIRIELEARN_ROOT=str(root)), cwd=root, timeout=600)


def test_prairielearn_entry_point_exits_0_with_grade_json_score(tmp_path):
    """PrairieLearn reads /grade/results/results.json only after an exit status of 0."""
    root = tmp_path / "grade"
    (root / "student").mkdir(parents=True)
    (root / "student" / "exercise3.py").write_text(MISTAKE, encoding="utf-8")
    seeded = dict(ENV, GRADE_SEED="7")
    result = prairielearn("exercise3", root=root, env=seeded)
    assert result.returncode == 0, result.stderr
    assert "Score " in result.stdout  # the report, for the job's log
    results = json.loads((root / "results" / "results.json").read_text())
    verdict = json.loads(grade("exercise3", "--submission", str(root / "student"), "--json", env=seeded).stdout)
    assert results["gradable"] is True and verdict["status"] == "failed"
    assert results["score"] == pytest.approx(verdict["score"] / verdict["max_score"])
    assert [t["points"] for t in results["tests"]] == [
        c["points"] for topic in ("api", "weights", "gradients", "config", "mask", "forward")
        for c in verdict["checks"] if c["topic"] == topic]


def test_prairielearn_entry_point_reports_an_ungradable_submission(tmp_path):
    root = tmp_path / "grade"
    (root / "student").mkdir(parents=True)
    (root / "student" / "exercise3.py").write_text("class TransformerEncoder(:\n", encoding="utf-8")
    (root / "results").mkdir()
    (root / "results" / "results.json").write_text('{"score": 1.0}')  # stale: replaced
    result = prairielearn("exercise3", "--timeout", "200", root=root)
    assert result.returncode == 0, result.stderr
    results = json.loads((root / "results" / "results.json").read_text())
    assert results["gradable"] is False and results["score"] == 0
    assert "SyntaxError at line 1" in results["format_errors"][0]


@pytest.mark.parametrize("args, says", [((), "python3 -m grader.integrations.prairielearn EXERCISE"),
                                        (("exercise9",), "unknown exercise 'exercise9'"),
                                        (("exercise3", "--timeout", "0"), "--timeout must be at least 1")])
def test_prairielearn_entry_point_fails_without_results_on_bad_arguments(tmp_path, args, says):
    (tmp_path / "student").mkdir()
    result = prairielearn(*args, root=tmp_path)
    assert result.returncode != 0 and says in result.stderr
    assert not (tmp_path / "results" / "results.json").exists()


def test_grade_batch_takes_a_gradescope_visibility(tmp_path):
    (tmp_path / "class").mkdir()
    (tmp_path / "class" / "bob.py").write_bytes(b"import keras\x00\n")  # unreadable: no child starts
    result = grade("batch", str(tmp_path / "class"), "--exercise", "exercise3", "--out", str(tmp_path / "out"),
                   "--gradescope-visibility", "hidden")
    assert result.returncode == 0, result.stderr
    results = json.loads((tmp_path / "out" / "gradescope" / "bob" / "results.json").read_text())
    assert results["visibility"] == "hidden" and results["score"] == 0


def test_the_platform_benchmark_measures_the_cold_grading_a_container_runs(monkeypatch):
    """benchmarks/platform_resources.py stands for a container's grading: through a warm grading server
    it would measure only the client (some 20 MiB against about 0.7 GB), whatever this machine has set."""
    import importlib.util

    monkeypatch.setenv("GRADE_SERVER", "on")
    path = Path(__file__).resolve().parent.parent / "benchmarks" / "platform_resources.py"
    spec = importlib.util.spec_from_file_location("platform_resources", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    command, env = module.cold_command("exercise3")
    assert "--no-server" in command and env["GRADE_SERVER"] == "off"
    assert "GRADE_SERVER=off" in module.__doc__


STAND_IN_PYTHON = r"""#!/usr/bin/env bash
# A Python 3.11 for setup.sh: this one, except that the virtual environment it makes holds stand-ins
# that log what pip and grade were asked to do (no package is downloaded, nothing is graded).
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
    mkdir -p "$3/bin"
    printf '#!/usr/bin/env bash\nif [ "$1 $2" = "-m pip" ]; then echo "pip $*" >> "%s"; exit 0; fi\nexec "%s" "$@"\n' \
        "$LOG" "$REAL" > "$3/bin/python"
    printf '#!/usr/bin/env bash\necho "grade $*" >> "%s"\n' "$LOG" > "$3/bin/grade"
    chmod +x "$3/bin/python" "$3/bin/grade"
    exit 0
fi
exec "$REAL" "$@"
"""


def test_setup_sh_writes_only_into_the_folders_the_guide_gives_it(autograder, tmp_path):
    """docs/gradescope.md's way to try setup.sh locally: with AUTOGRADER_ROOT and GRADE_BIN_DIR it makes
    its virtual environment and its link to grade under the folder given, and checks the reference
    solution with that grade; pip and grade are stand-ins here (no network, no TensorFlow install)."""
    _, entries = autograder
    guide = (Path(__file__).resolve().parent.parent / "docs" / "gradescope.md").read_text(encoding="utf-8")
    assert "AUTOGRADER_ROOT=ROOT GRADE_BIN_DIR=ROOT/bin GRADE_PYTHON=python3.11 bash ROOT/source/setup.sh" in guide
    for variable in re.findall(r"^#   (GRADE_\w+|AUTOGRADER_ROOT)", entries["setup.sh"][0].decode(), re.M):
        assert f"`{variable}`" in guide, variable
    root, log = tmp_path / "ROOT", tmp_path / "calls.log"
    (root / "source").mkdir(parents=True)
    for name, (data, mode) in entries.items():
        (root / "source" / name).write_bytes(data)
    python = tmp_path / "python3.11"
    python.write_text(STAND_IN_PYTHON)
    python.chmod(0o755)
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), GRADE_BIN_DIR=str(root / "bin"), GRADE_PYTHON=str(python),
               LOG=str(log), REAL=sys.executable)
    result = subprocess.run(["bash", str(root / "source" / "setup.sh")], env=env, capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
    assert os.readlink(root / "bin" / "grade") == str(root / "venv" / "bin" / "grade")
    calls = log.read_text().splitlines()
    assert calls[0].endswith(f"-r {root / 'source' / 'requirements.txt'}")
    assert calls[1].endswith(".whl") and "--no-deps" in calls[1]
    assert calls[2].startswith("grade exercise3 --submission ") and calls[2].split()[3].endswith("exercise3.py")
    assert sorted(p.name for p in root.iterdir()) == ["bin", "source", "venv"]
