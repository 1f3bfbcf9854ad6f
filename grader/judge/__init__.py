"""What the checks are written with: the library every exercise's ``checks.py`` imports.

The checks live with their exercises (``grader/exercises/<id>/checks.py``), one
small pytest function per fact about a student's layer: each carries an id, a
title, a topic and points (``@check``), receives the evidence the child returned
(the ``evidence`` fixture) and fails with a message that says what was observed,
what was expected and why it matters. This package holds what they share: the
vocabulary (``framework``), typed evidence, the replay and its budget, the NumPy
references, the checks every layer exercise declares (``contract``) and the logic they
share, a module per topic (``shared``). It runs only in a judge (``grader.judging``),
never beside student code, and imports no exercise: the exercises import it.
"""
