"""The grading process's entry points: where a child starts, and the batch worker it may fork from.

A fresh grading process is ``python -I -m grader.child`` (``__main__``): the keeper,
then the grading process in its own namespaces, which imports the backend,
confines itself, loads the submission and runs the exercise's probe. The batch
worker (``worker``) imports the backend and every probe once (``preload``) and
forks one such grading process per submission (``forked``). What runs beside the
student's code is ``grader.probe``; each exercise's phases are its ``probe.py``.
"""
