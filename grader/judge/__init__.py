"""Judging one submission's evidence, in a process of its own with hard limits.

The checks and the replay read what a submission's grading process claims, and
a claim can be sized to exhaust whoever reads it. So the grader never runs a
check itself: each submission's evidence is judged in a judge process forked
from the judge server (``server``), which has NumPy, autograd, pytest and the
checks imported once. A judge has an address-space limit and a CPU-time limit
of its own, and a wall-clock limit the grader enforces by killing it; what it
sends back is checked before it is read (``client``). A judge that dies,
overruns or answers nonsense gives its submission an error verdict and costs
no other submission anything. The grader's side of it is ``client``.

The judge server and its judges run only the grader's code, on data; they are
hidden from every grading process, as the checks are.

The checks themselves live with their exercises (``grader/exercises/<id>/checks.py``),
one small pytest function per fact about a student's layer: each carries an id, a
title, a topic and points (``@check``), receives the evidence the child returned
(the ``evidence`` fixture) and fails with a message that says what was observed,
what was expected and why it matters. This package holds what they share: the
vocabulary (``framework``), typed evidence, the replay and its budget, the NumPy
references, the checks every layer exercise declares (``contract``) and the logic they
share, a module per topic (``shared``).
"""
