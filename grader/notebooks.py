"""Builds the nbgrader course: one notebook per exercise, from the same solutions as the stubs.

Each notebook holds the instructions, the answer cell (the solution with
nbgrader's markers, which ``nbgrader generate_assignment`` turns into the stub),
and one locked, graded test cell per topic whose points are the checks' points.
Visible tests are plain asserts that need only TensorFlow; the hidden part of
each test cell calls ``grader.notebook.assert_topic``, which only the grading
machine needs. Exercise 3 adds a manually graded written answer to the seed's
question, with its mark scheme inside the solution region.

Notebooks are deterministic (fixed cell ids, no outputs), so a committed course
can be checked for drift.
"""

from __future__ import annotations

from pathlib import Path

import nbformat

from . import exercises
from .stubs import expected_solution

COURSE_ID = "transformer-chapter"
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}

CONFIG = '''\
"""nbgrader configuration of the Transformer chapter course (written by `grade nbgrader-course`)."""

import os

# TensorFlow and Keras write to stderr (C++ logs, CUDA probing, warnings), and nbgrader gives
# 0 points to a test cell with any stderr output. For the kernels nbgrader starts:
# - no TensorFlow C++ logs, and no oneDNN notice;
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
# - no Python warnings (a real error is an exception, and still fails its cell);
os.environ["PYTHONWARNINGS"] = "ignore"

c = get_config()  # noqa: F821  (nbgrader provides get_config)
c.CourseDirectory.course_id = "{course_id}"
c.CourseDirectory.db_assignments = {assignments}
# - and the kernel's own file descriptors (where C++ logs that ignore the settings above land)
#   are not copied into cell outputs.
c.Execute.extra_arguments = ["--IPKernelApp.capture_fd_output=False"]
# Importing TensorFlow takes seconds; the first hidden test grades the whole answer.
c.Execute.timeout = {timeout}
c.ClearSolutions.code_stub = {{"python": "# YOUR CODE HERE\\nraise NotImplementedError()"}}
'''

VISIBLE_TESTS = {
    "exercise1": '''\
import numpy as np

layer = PositionalEmbedding(10, 50, 8)
tokens = np.array([[3, 7, 2, 0, 0], [5, 1, 4, 9, 8]], dtype="int32")
output = layer(tokens)
assert tuple(output.shape) == (2, 5, 8), f"expected (2, 5, 8), got {tuple(output.shape)}"
mask = layer.compute_mask(tokens)
assert mask is not None and tuple(mask.shape) == (2, 5), "compute_mask should return a (batch, seq) mask"
''',
    "exercise2": '''\
import numpy as np

layer = SelfAttentionBlock(8, 2)
output = layer(np.zeros((2, 5, 8), dtype="float32"))
assert tuple(output.shape) == (2, 5, 8), f"expected (2, 5, 8), got {tuple(output.shape)}"
''',
    "exercise3": '''\
import numpy as np

layer = TransformerEncoder(8, 16, 2)
output = layer(np.zeros((2, 5, 8), dtype="float32"))
assert tuple(output.shape) == (2, 5, 8), f"expected (2, 5, 8), got {tuple(output.shape)}"
''',
    "exercise4": '''\
import numpy as np

layer = TransformerDecoder(8, 16, 2)
output = layer(np.zeros((2, 4, 8), dtype="float32"), np.zeros((2, 6, 8), dtype="float32"))
assert tuple(output.shape) == (2, 4, 8), f"expected (2, 4, 8), got {tuple(output.shape)}"
''',
    "exercise5": '''\
model = build_classifier(40, 12, 16, 32, 2)
assert model.output_shape == (None, 1), f"expected (None, 1), got {model.output_shape}"
''',
}

WRITTEN_QUESTION = """\
## A written answer

The encoder creates two `LayerNormalization` layers with identical arguments. Why
not create one and call it twice? Answer in a few sentences in the cell below.

You may back your answer with measurements: where this course's `grade` command is
installed, `grade explain exercise3 --submission exercise3.ipynb` trains a small
classifier around your encoder with two norms and with one shared norm, and reports
for each claim whether the numbers support it.
"""

WRITTEN_ANSWER = """\
### BEGIN SOLUTION
**Model answer.** Each `LayerNormalization` has its own learned scale (gamma) and shift
(beta). The two norms see differently distributed inputs — the attention residual and the
feed-forward residual — so each needs parameters fitted to its own input. The original
Transformer gives every residual sub-block its own norm. One shared norm would force shared
gamma and beta and couple the gradient updates of both positions.

**Mark scheme (2 points).** 1 point: the norms have learned parameters (gamma, beta) that a
shared layer would share. 1 point: the two positions see different distributions, or the
original design gives each sub-block its own norm, or sharing couples the updates of both
positions. 0 points for "they are the same, it does not matter".
### END SOLUTION
"""


def _nbgrader(grade_id: str, *, solution: bool, grade: bool, locked: bool, points: float | None = None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked, "schema_version": 3,
            "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return {"nbgrader": meta}


def build_notebook(exercise) -> nbformat.NotebookNode:
    notebook = nbformat.v4.new_notebook()
    notebook.metadata = {"kernelspec": KERNELSPEC, "language_info": {"name": "python"}}
    cells = [
        nbformat.v4.new_markdown_cell(exercise.instructions.read_text(encoding="utf-8")),
        nbformat.v4.new_code_cell(
            expected_solution(exercise).rstrip("\n"),
            metadata=_nbgrader(f"{exercise.id}-answer", solution=True, grade=False, locked=False),
        ),
    ]
    for topic, points in exercise.topic_points().items():
        visible = VISIBLE_TESTS[exercise.id] + "\n" if topic == "api" else ""
        source = (
            f"# Tests: {topic}. The hidden part runs when your notebook is graded.\n"
            f"{visible}"
            "### BEGIN HIDDEN TESTS\n"
            "from grader.notebook import assert_topic\n"
            f'assert_topic("{exercise.id}", "{topic}")\n'
            "### END HIDDEN TESTS"
        )
        cells.append(nbformat.v4.new_code_cell(
            source, metadata=_nbgrader(f"{exercise.id}-{topic}", solution=False, grade=True, locked=True,
                                       points=points)))
    if exercise.id == "exercise3":
        cells.append(nbformat.v4.new_markdown_cell(WRITTEN_QUESTION))
        cells.append(nbformat.v4.new_markdown_cell(
            WRITTEN_ANSWER.rstrip("\n"),
            metadata=_nbgrader(f"{exercise.id}-why-two-norms", solution=True, grade=True, locked=False, points=2),
        ))
    for index, cell in enumerate(cells):
        cell.id = f"{exercise.id}-{index:02d}"
    notebook.cells = cells
    nbformat.validate(notebook)
    return notebook


def config_text(timeout: int = 300) -> str:
    assignments = [{"name": e.id} for e in exercises.EXERCISES.values()]
    return CONFIG.format(course_id=COURSE_ID, assignments=repr(assignments), timeout=timeout)


def write_course(folder: Path) -> list[Path]:
    """Write ``nbgrader_config.py`` and ``source/<id>/<id>.ipynb`` for every exercise."""
    folder = Path(folder)
    written = [folder / "nbgrader_config.py"]
    folder.mkdir(parents=True, exist_ok=True)
    written[0].write_text(config_text(), encoding="utf-8")
    for exercise in exercises.EXERCISES.values():
        path = folder / "source" / exercise.id / f"{exercise.id}.ipynb"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(nbformat.writes(build_notebook(exercise)) + "\n", encoding="utf-8")
        written.append(path)
    return written
