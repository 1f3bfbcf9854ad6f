"""Hidden graders for the Transformer exercises.

``api.grade`` runs a submission in a confined child process (``sandbox``, ``probe``), has a judge
process run the exercise's pytest checks (``judge``, ``exercises/<id>/checks.py``) over the plain
data the child returned, and gives a ``verdict.Verdict``; ``report`` renders it with Rich and
``cli`` is the ``grade`` command.
"""

__version__ = "0.1.0"
