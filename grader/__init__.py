"""Hidden graders for the Transformer exercises.

``api.grade`` runs a submission in a confined child process (``sandbox``, ``probe``), has a judge
process run the exercise's pytest checks (``judge``, ``exercises/<id>/checks.py``) over the plain
data the child returned, and gives a ``verdict.Verdict``; ``report`` renders it with Rich and
``cli`` is the ``grade`` command; ``check``, in a notebook, shows the report of the notebook's answer
in the cell (``in_notebook``).
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    """``grader.check``, imported when first asked for: importing ``grader`` imports nothing else."""
    if name == "check":
        from .in_notebook import check

        return check
    raise AttributeError(f"module 'grader' has no attribute {name!r}")
