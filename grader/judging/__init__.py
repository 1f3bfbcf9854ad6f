"""Judging one submission's evidence, in a process of its own with hard limits.

The checks and the replay read what a submission's grading process claims, and
a claim can be sized to exhaust whoever reads it. So the grader never runs a
check itself: each submission's evidence is judged in a judge process forked
from the judge server (``server``), which has NumPy, autograd, pytest and the
checks imported once. A judge has an address-space limit and a CPU-time limit
of its own, and a wall-clock limit the grader enforces by killing it; what it
sends back is checked before it is read (``exchange``). A judge that dies,
overruns or answers nonsense gives its submission an error verdict and costs
no other submission anything. The grader's side of it is ``client``; what a
judge does, ``judgment``: the exercise's checks run under pytest (``plugin``).
The grader reads what the checks declare (``declarations``) without judging.

The judge server and its judges run only the grader's code, on data; they are
hidden from every grading process, as the checks are. The checks, and what they
are written with, are not here: each exercise's ``checks.py`` and ``grader.judge``.
"""
