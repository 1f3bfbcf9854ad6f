"""Submissions that cannot be graded get status "error" with a clear message; none ever passes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grader import exercises
from grader.api import Grading, Settings, grade
from grader.integrations.platforms import gradescope_results, prairielearn_results
from grader.sandbox.evidence import ChildRun

from .conftest import ExpireAt, grade_many, grade_sources, grade_warm, warm_runner

SOLUTION = exercises.get("exercise3").solution.read_text(encoding="utf-8")
STUB = exercises.get("exercise3").stub.read_text(encoding="utf-8")

BROKEN = {
    "syntax_error": "import keras\n\nclass TransformerEncoder(keras.layers.Layer):\n    def call(self, x:\n        return x\n",
    "empty_file": "",
    "other_class_name": SOLUTION.replace("class TransformerEncoder(", "class Encoder("),
    "missing_module": "import tensorflow_transformers_helper\n" + SOLUTION,
    "raises_at_import": SOLUTION + "\nraise RuntimeError('training data not found')\n",
    "not_a_layer": SOLUTION.replace("class TransformerEncoder(layers.Layer):", "class TransformerEncoder:"),
    "wrong_constructor_signature": SOLUTION.replace(
        "def __init__(self, embed_dim, dense_dim, num_heads, **kwargs):",
        "def __init__(self, d_model, ff_dim, heads, **kwargs):",
    ),
    "exits_at_import_after_forging": (
        STUB + "\nimport os\nprint('{\"status\": \"passed\", \"score\": 23}')\nprint('23 passed, 0 failed')\nos._exit(0)\n"
    ),
}
EXPECTED = {
    "syntax_error": "SyntaxError at line 4, column",
    "empty_file": "has no TransformerEncoder",
    "other_class_name": "it defines Encoder",
    "missing_module": "ModuleNotFoundError",
    "raises_at_import": "training data not found",
    "exits_at_import_after_forging": "could not be imported",
    "not_a_layer": "is not a Keras layer: it derives from builtins.object",
    "wrong_constructor_signature": "cannot be called with the exercise's arguments",
}


@pytest.fixture(scope="module")
def broken_verdicts(tmp_path_factory):
    return grade_sources("exercise3", BROKEN, tmp_path_factory.mktemp("broken"), warm=True)


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_submission_is_an_error(broken_verdicts, name):
    verdict = broken_verdicts[name]
    assert verdict.status == "error"
    assert verdict.exit_code == 2
    assert verdict.score == 0 and verdict.max_score > 0
    assert EXPECTED[name] in verdict.error
    assert "grader/" not in verdict.error  # no traceback from the grader's own code


def test_raises_at_import_points_at_the_students_line(broken_verdicts):
    assert "at line" in broken_verdicts["raises_at_import"].error


@pytest.mark.parametrize(
    "name, data, says",
    [
        ("nul.py", b"import keras\x00\n", "NUL bytes"),
        ("latin1.py", "# caf\xe9\nimport keras\n".encode("latin-1"), "not UTF-8"),
        ("broken.ipynb", b'{"cells": [', "not a readable notebook"),
        ("notes.txt", b"hello", ".py file or an .ipynb notebook"),
    ],
)
def test_unreadable_files_are_errors_without_starting_a_child(tmp_path, name, data, says):
    path = tmp_path / name
    path.write_bytes(data)

    def no_child(*_args):
        raise AssertionError("a child was started for an unreadable file")

    verdict = Grading("exercise3", path, runner=no_child).finish()
    assert verdict.status == "error" and says in verdict.error


def test_missing_file_is_an_error(tmp_path):
    verdict = grade("exercise3", tmp_path / "nowhere.py")
    assert verdict.status == "error" and "does not exist" in verdict.error


def test_a_file_saved_with_a_byte_order_mark_is_graded_as_python_reads_it(tmp_path):
    path = tmp_path / "exercise3.py"
    path.write_bytes(b"\xef\xbb\xbf" + SOLUTION.encode("utf-8"))  # how Notepad saves UTF-8
    verdict = grade_warm("exercise3", path)
    assert verdict.status == "passed", verdict.error


def test_notebook_grades_like_the_python_file(tmp_path, catalog_verdicts):
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_markdown_cell("# Exercise 3"),
        nbformat.v4.new_code_cell("%matplotlib inline\n!pip list"),
        nbformat.v4.new_code_cell(SOLUTION),
    ]
    path = tmp_path / "exercise3.ipynb"
    nbformat.write(notebook, path)
    a, b = grade_warm("exercise3", path), catalog_verdicts[("exercise3", "solution")]
    assert a.status == "passed"
    assert [(c.id, c.status) for c in a.checks] == [(c.id, c.status) for c in b.checks]


def test_notebook_without_the_class_is_an_error(tmp_path):
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("import keras\nx = 1")]
    path = tmp_path / "exercise3.ipynb"
    nbformat.write(notebook, path)
    verdict = grade_warm("exercise3", path)
    assert verdict.status == "error" and verdict.exit_code == 2
    assert "has no TransformerEncoder" in verdict.error


# --------------------------------------------------------------------------- notebooks are graded on their answers


def released_notebook(exercise_id: str, answer: str, own_cells: tuple[tuple[int, str], ...] = ()):
    """The course's notebook of ``exercise_id`` as nbgrader releases it (test cells without their
    hidden tests), ``answer`` in its answer cell, and ``own_cells`` — (position, source) — added
    by the student, as Jupyter adds a cell: without nbgrader metadata."""
    import nbformat

    from grader.integrations.course import build_notebook

    notebook = build_notebook(exercises.get(exercise_id))
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade"):
            cell.source = cell.source.split("### BEGIN HIDDEN TESTS")[0].rstrip()
        elif cell.cell_type == "code" and meta.get("solution"):
            cell.source = answer
    for position, source in own_cells:
        notebook.cells.insert(position, nbformat.v4.new_code_cell(source))
    return notebook


# A catalogued mistake of each exercise that the released "Check your work" cell's asserts reject:
# compute_mask returning None, call returning a tuple, a two-unit softmax. Graded as .py files they
# earn part of the points; a notebook holding them must earn the same.
PARTLY_RIGHT = [("exercise1", "no_compute_mask"), ("exercise3", "returns_a_tuple"), ("exercise5", "two_class_softmax")]
# What a student adds below the check cell while working: a question to IPython, a check of their
# own that fails, a call of a name they never defined. None of it is the answer.
SCRATCH = ((3, "PositionalEmbedding?"), (3, "assert False, 'a check of my own'"), (3, "print(undefined_name)"))


@pytest.fixture(scope="module")
def partly_right(tmp_path_factory):
    """{(exercise, mistake): (verdict of the .py file, verdict of the released notebook holding it)}."""
    import nbformat

    from .catalog import catalog

    folder = tmp_path_factory.mktemp("partly_right")
    paths = {}
    for exercise_id, name in PARTLY_RIGHT:
        source = next(m.source for m in catalog(exercise_id)[0] if m.name == name)
        python = folder / f"{exercise_id}-{name}.py"
        python.write_text(source, encoding="utf-8")
        notebook = folder / f"{exercise_id}-{name}.ipynb"
        nbformat.write(released_notebook(exercise_id, source, SCRATCH), notebook)
        paths[exercise_id, name] = (python.resolve(), notebook.resolve())
    verdicts = {}
    for exercise_id, name in PARTLY_RIGHT:
        graded = dict(grade_many(exercise_id, list(paths[exercise_id, name]), Settings(seed=7), jobs=2,
                                 runner=warm_runner()))
        verdicts[exercise_id, name] = tuple(graded[path] for path in paths[exercise_id, name])
    return verdicts


@pytest.mark.parametrize("exercise_id, name", PARTLY_RIGHT)
def test_a_partly_right_answer_in_the_released_notebook_scores_as_its_python_file(partly_right, exercise_id,
                                                                                   name):
    """The check cell's assert fails on this answer, and so do the student's scratch cells: none of them
    is graded. The notebook gets the .py file's verdict, check by check, and the same results on every
    platform."""
    python, notebook = partly_right[exercise_id, name]
    assert python.status == "failed" and 0 < python.score < python.max_score
    assert notebook.status == "failed", notebook.error
    assert [(c.id, c.status, c.points) for c in notebook.checks] == [(c.id, c.status, c.points) for c in python.checks]
    assert (notebook.score, notebook.max_score) == (python.score, python.max_score)
    assert gradescope_results(notebook)["score"] == gradescope_results(python)["score"]
    assert prairielearn_results(notebook)["score"] == prairielearn_results(python)["score"]


def _graded_cells(notebook) -> list[int]:
    """The code cells of ``notebook`` that ``grade`` runs, by their number among its code cells."""
    import nbformat

    from grader.submission import notebook_submission

    source = notebook_submission(nbformat.writes(notebook).encode("utf-8"), Path("exercise3.ipynb"))
    return [number for _, _, number in source.cells]


def test_a_course_notebook_runs_its_answers_and_the_cells_of_the_student_s_own_they_use():
    """Code cells, numbered as Jupyter shows them: 1 imports numpy, 2 the answer (using np and a
    helper), 3 the check cell, 4 the helper, 5 a scratch call, 6 an IPython question; then the test
    cells. Only the answer, the helper and what the helper needs (numpy's import) run."""
    answer = SOLUTION.replace("mask = keras.ops.expand_dims(mask, axis=1)", "mask = expand(np, mask)")
    helper = "def expand(numpy, mask):\n    return keras.ops.expand_dims(mask, axis=1)\n"
    own = ((1, "import numpy as np\nimport keras"), (4, "layer?"), (4, "layer = TransformerEncoder(8, 16, 2)\nlayer(1)"),
           (4, helper))
    notebook = released_notebook("exercise3", answer, own)
    assert [c.cell_type for c in notebook.cells[:7]] == ["markdown"] + ["code"] * 6
    assert notebook.cells[3].metadata["nbgrader"]["grade_id"] == "exercise3-check"
    assert _graded_cells(notebook) == [1, 2, 4]


def test_a_cell_that_is_not_python_is_graded_only_when_the_answer_needs_a_name_nobody_defines():
    uses_a_helper = SOLUTION.replace("mask = keras.ops.expand_dims(mask, axis=1)", "mask = expand(mask)")
    broken_helper = "def expand(mask)\n    return keras.ops.expand_dims(mask, axis=1)\n"  # the colon forgotten
    assert _graded_cells(released_notebook("exercise3", uses_a_helper, ((1, broken_helper),))) == [1, 2]
    assert _graded_cells(released_notebook("exercise3", SOLUTION, ((1, broken_helper),))) == [2]
    star = released_notebook("exercise3", uses_a_helper, ((1, "from helpers import *"), (1, "x = 1")))
    assert _graded_cells(star) == [2, 3]  # the star import may define expand; x = 1 defines nothing used


def test_a_notebook_without_answer_cells_is_graded_whole_but_for_its_test_and_locked_cells():
    import nbformat

    locked = nbformat.v4.new_code_cell("assert False, 'a read-only check'")
    locked.metadata["nbgrader"] = {"grade": False, "solution": False, "locked": True, "grade_id": "check",
                                   "schema_version": 3, "task": False}
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("import keras"), locked, nbformat.v4.new_code_cell("x = 1"),
                      nbformat.v4.new_code_cell(SOLUTION)]
    assert _graded_cells(notebook) == [1, 3, 4]


# Submissions that never finish cost their time limit. The submission's clock starts once the grading
# process is ready (TensorFlow imported, confined), so a short limit is the same on a busy machine; what
# never finishes here does so from its first line, so nothing else has to fit in the limit.
LIMIT = 3
NEVER_FINISHING = {
    "sleeps_at_import": "import time\ntime.sleep(3600)\n" + SOLUTION,
}
# Ends in its mask phase: its clock is run out the moment that phase starts, which is where a limit
# reached inside the endless call would find it, whatever the machine's load.
ENDLESS_MASKED_CALL = SOLUTION.replace(
    "        proj_output = self.dense_proj(proj_input)\n",
    "        proj_output = self.dense_proj(proj_input)\n"
    "        if mask is not None:\n            while True:\n                pass\n",
)


@pytest.fixture(scope="module")
def never_finishing(tmp_path_factory):
    """The submissions that never finish, and a notebook whose cell never does, graded at once; and
    the endless masked call, whose clock runs out as its mask phase starts."""
    import nbformat

    folder = tmp_path_factory.mktemp("never")
    paths = {}
    for name, source in NEVER_FINISHING.items():
        paths[name] = folder / f"{name}.py"
        paths[name].write_text(source, encoding="utf-8")
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("import keras"),
                      nbformat.v4.new_code_cell("import time\nwhile True:\n    time.sleep(1)"),
                      nbformat.v4.new_code_cell(SOLUTION)]
    paths["notebook_cell"] = folder / "exercise3.ipynb"
    nbformat.write(notebook, paths["notebook_cell"])
    names = {path.resolve(): name for name, path in paths.items()}
    graded = grade_many("exercise3", list(paths.values()), Settings(timeout=LIMIT), jobs=len(paths),
                        runner=warm_runner())
    verdicts = {names[path]: verdict for path, verdict in graded}
    endless = folder / "endless_masked_call.py"
    endless.write_text(ENDLESS_MASKED_CALL, encoding="utf-8")
    verdicts["endless_masked_call"] = Grading("exercise3", endless, Settings(timeout=600),
                                              runner=ExpireAt(warm_runner(), "mask", sources=[ENDLESS_MASKED_CALL])).finish()
    return verdicts


def test_sleep_at_import_hits_the_time_limit(never_finishing):
    verdict = never_finishing["sleeps_at_import"]
    assert verdict.status == "error" and verdict.exit_code == 2
    assert "Importing your file did not finish within the time limit" in verdict.error
    assert LIMIT <= verdict.context["seconds"] < 600  # killed at the limit, not after the hour it sleeps


def test_endless_call_times_out_its_checks_and_keeps_the_rest(never_finishing):
    verdict = never_finishing["endless_masked_call"]
    statuses = {c.id: c.status for c in verdict.checks}
    assert verdict.status == "failed"
    assert statuses["forward.post_norm"] == "passed"  # evidence gathered before the loop counts
    assert statuses["mask.padding_invariance"] == "timeout"
    assert statuses["config.from_config"] == "timeout"
    assert verdict.score < verdict.max_score
    assert json.dumps(verdict.to_json())


def test_notebook_is_graded_as_nbgrader_runs_it_and_errors_name_the_cell(tmp_path):
    """A notebook without answer cells: every code cell that is not a test cell, in order; a helper in
    its own cell works; an error names the code cell and the line in it."""
    import nbformat

    helper = "import keras\n\n\ndef expand(mask):\n    return keras.ops.expand_dims(mask, axis=1)\n"
    answer = SOLUTION.replace("mask = keras.ops.expand_dims(mask, axis=1)", "mask = expand(mask)")
    test_cell = nbformat.v4.new_code_cell("assert False, 'a test cell is not part of the answer'")
    test_cell.metadata["nbgrader"] = {"grade": True, "solution": False, "grade_id": "tests", "locked": True,
                                      "points": 1, "schema_version": 3, "task": False}
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_markdown_cell("# Exercise 3"), nbformat.v4.new_code_cell("%matplotlib inline"),
                      nbformat.v4.new_code_cell(helper), nbformat.v4.new_code_cell(answer), test_cell]
    path = tmp_path / "exercise3.ipynb"
    nbformat.write(notebook, path)
    broken = tmp_path / "broken.ipynb"
    notebook.cells[3] = nbformat.v4.new_code_cell(answer.replace(
        "proj_output = self.dense_proj(proj_input)", "proj_output = self.dense_proj(proj_input) + missing_name"))
    nbformat.write(notebook, broken)
    works, fails = grade_warm("exercise3", path), grade_warm("exercise3", broken)
    assert works.status == "passed", [c.message for c in works.checks if c.status != "passed"]
    failure = next(c for c in fails.checks if c.status == "failed")
    assert "NameError" in failure.message and "code cell 3, line" in failure.message


def test_notebook_cell_source_that_is_not_text_is_unreadable_not_a_crash(tmp_path):
    path = tmp_path / "odd.ipynb"
    path.write_text(json.dumps({"cells": [{"cell_type": "code", "source": ["x = 1", 5], "metadata": {}}]}))
    verdict = Grading("exercise3", path, runner=lambda *a, **k: (_ for _ in ()).throw(AssertionError)).finish()
    assert verdict.status == "error" and "code cell 1" in verdict.error


def test_syntax_error_is_found_without_running_anything_and_shows_the_line(tmp_path):
    path = tmp_path / "exercise3.py"
    path.write_text("import keras\n\nclass TransformerEncoder(keras.layers.Layer):\n    def call(self, x:\n"
                    "        return x\n", encoding="utf-8")

    def no_child(*_args, **_kwargs):
        raise AssertionError("a child was started for a file that does not compile")

    verdict = Grading("exercise3", path, runner=no_child).finish()
    assert verdict.status == "error" and verdict.exit_code == 2
    assert "exercise3.py has a SyntaxError at line 4, column 13" in verdict.error
    assert "    def call(self, x:\n" in verdict.error and verdict.error.endswith("^")
    assert "submission.py" not in verdict.error


def test_syntax_error_in_a_notebook_names_the_cell(tmp_path):
    import nbformat

    notebook = nbformat.v4.new_notebook()
    notebook.cells = [nbformat.v4.new_code_cell("import keras"), nbformat.v4.new_code_cell("x = (1,\ny = 2")]
    path = tmp_path / "exercise3.ipynb"
    nbformat.write(notebook, path)
    verdict = Grading("exercise3", path, runner=lambda *a, **k: (_ for _ in ()).throw(AssertionError)).finish()
    assert verdict.status == "error" and "at code cell 2, line 1" in verdict.error


def test_a_notebook_cell_that_never_finishes_is_named(never_finishing):
    verdict = never_finishing["notebook_cell"]
    assert verdict.status == "error" and "code cell 2 was still running" in verdict.error


class FinishedChild:
    """A runner whose child has already ended as ``run`` says: no process, no clock."""

    def __init__(self, run: ChildRun):
        self.run = run

    def __call__(self, job, source, timeout, memory_mb, respond=None):
        return self

    def wait(self) -> ChildRun:
        return self.run


RUNTIME = {"ok": True, "data": {"tensorflow": "2.21.0", "keras": "3.15.1",
                                "sandbox": {"applied": False, "reason": "a test"}}}


@pytest.mark.parametrize("phases, startup, says", [
    ({}, True, "the grading process did not get ready within 600 s (starting Python, importing TensorFlow"),
    ({}, False, "stopped while importing TensorFlow, before any of the submission ran"),
    ({"runtime": RUNTIME}, False, "Importing your file did not finish within the time limit (60 s)"),
])
def test_running_out_of_time_before_the_layer_exists_says_where(tmp_path, phases, startup, says):
    """The submission's limit is named as it was set, whatever the start-up took; a start-up that
    never ended is the machine's failure, never a reason to raise the submission's limit."""
    path = tmp_path / "exercise3.py"
    path.write_text(SOLUTION, encoding="utf-8")
    run = ChildRun(phases=dict(phases), started=[*phases, "load"], timed_out=True, startup_timed_out=startup,
                   seconds=95.0, time_limit=60.0)
    verdict = Grading("exercise3", path, Settings(timeout=60), runner=FinishedChild(run)).finish()
    assert verdict.status == "error" and verdict.exit_code == 2
    assert says in verdict.error
    assert "--timeout" not in verdict.error
