"""PrairieLearn's external grading entry point.

    python3 -m grader.integrations.prairielearn EXERCISE [--timeout S] [--memory MB] [--seed N]

PrairieLearn mounts the grading job at ``/grade`` (``PRAIRIELEARN_ROOT`` moves it): the
student's files in ``/grade/student/``, and it reads ``/grade/results/results.json`` only
when the entry point exits with status 0. This runs ``grade EXERCISE --submission
/grade/student --prairielearn-results /grade/results/results.json`` (this installation's),
whose report goes to the job's log, and exits 0 once the results are written, whatever the
verdict (the score is in them). Without results — the grader itself failed, or the arguments
were wrong — it exits non-zero, and PrairieLearn reports that grading failed instead of
scoring the student.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from ..verdict import EXIT_ERROR


def main(argv: list[str] | None = None) -> int:
    """Grade PrairieLearn's job with the ``grade`` command of this installation (``python -P -m
    grader``: this interpreter's, so no PATH is needed, and never a ``grader`` folder where the job
    runs): the command is the contract both sides keep, and its report reaches the job's log as it
    is printed."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0].startswith("-"):
        print(__doc__.strip().split("\n\n")[1], file=sys.stderr)
        return EXIT_ERROR
    root = Path(os.environ.get("PRAIRIELEARN_ROOT") or "/grade")
    results = root / "results" / "results.json"
    results.unlink(missing_ok=True)
    status = subprocess.run([sys.executable, "-P", "-m", "grader", argv[0], "--submission", str(root / "student"),
                             "--prairielearn-results", str(results), *argv[1:]]).returncode
    if results.is_file():
        return 0
    return status if status > 0 else EXIT_ERROR  # a grade ended by a signal: no results either


if __name__ == "__main__":
    sys.exit(main())
