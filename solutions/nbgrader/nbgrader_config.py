"""nbgrader configuration of the Transformer chapter course (written by `grade nbgrader-course`).

Assignments need no declaration here: `nbgrader generate_assignment exerciseN` adds each one to
gradebook.db. Release exercise5 only after exercise1 and exercise3 are due: its answer cell
carries their reference layers.
"""

import json
import logging
import os
import warnings
from pathlib import Path

# TensorFlow and Keras write to stderr (C++ logs, CUDA probing, warnings), and nbgrader gives
# 0 points to a test cell with any stderr output. The course's own test cells keep their output
# clean whatever the student's code writes; for the kernels nbgrader starts, and for test cells
# you add yourself:
# - no TensorFlow C++ logs, and no oneDNN notice;
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
# - no Python warnings (a real error is an exception, and still fails its cell);
os.environ["PYTHONWARNINGS"] = "ignore"

c = get_config()  # noqa: F821  (nbgrader provides get_config)
c.CourseDirectory.course_id = "transformer-chapter"
# - the kernel's file descriptors are not copied into cell outputs, and what is written to them
#   (TensorFlow's CUDA probing, printed before its log settings apply) is dropped instead of
#   reaching this console; so is the kernel's notice that it talks to nbgrader over local TCP.
c.Execute.extra_arguments = [
    "--IPKernelApp.capture_fd_output=False",
    "--IPKernelApp.exec_lines=import os; os.dup2(os.open(os.devnull, os.O_WRONLY), 2)",
    "--IPKernelApp.log_level=ERROR",
]
# Importing TensorFlow takes seconds; the first hidden test grades the whole answer.
c.Execute.timeout = 300
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}


class ReleasedTestCells(logging.Filter):
    """nbgrader autograde warns that the checksum of every test cell with hidden tests changed:
    gradebook.db keeps the checksum of the full cell, students get the cell without its hidden
    tests, and autograde restores the full cell either way. The warning is dropped when the
    submitted cell is exactly the released one; a test cell a student edited is still reported."""

    def __init__(self, release: Path):
        super().__init__()
        self.release = release
        self.released = None

    def filter(self, record):
        args = record.args if isinstance(record.args, tuple) else ()
        if len(args) != 4 or args[0] != "checksum" or "has changed" not in str(record.msg):
            return True
        if self.released is None:
            self.released = {}
            for notebook in sorted(self.release.glob("*/*.ipynb")):
                try:
                    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
                except (OSError, ValueError, KeyError):
                    continue
                for cell in cells:
                    meta = cell.get("metadata", {}).get("nbgrader", {})
                    if meta.get("grade_id") and meta.get("checksum"):
                        self.released.setdefault(meta["grade_id"], set()).add(meta["checksum"])
        _, grade_id, _, submitted = args
        return submitted not in self.released.get(grade_id, ())


logging.getLogger("AutogradeApp").addFilter(ReleasedTestCells(Path(__file__).resolve().parent / "release"))
# nbgrader's own database code warns about SQLAlchemy sessions during autograde: nothing to act on.
warnings.filterwarnings("ignore", message=r".*not in session, .* operation along .* will not proceed")
