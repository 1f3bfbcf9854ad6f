"""Hidden graders for the Transformer exercises.

``grading.grade`` runs a submission in a child process (``sandbox``, ``child``),
runs the exercise's pytest checks (``checks``) over the plain data it returns,
and gives a ``verdict.Verdict``; ``report`` renders it with Rich and ``cli``
is the ``grade`` command.
"""

__version__ = "0.1.0"
