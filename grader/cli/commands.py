"""The table of ``grade``'s commands (data only: ``grader.cli.command`` runs one)."""

from __future__ import annotations

# Every command but grading itself (``grade EXERCISE``): its name, and the module of this package
# and the function that run it. A name that is neither a command nor an exercise gets suggestions
# from both.
COMMANDS = {
    "init": ("student", "init_command"),
    "list": ("student", "list_command"),
    "hint": ("student", "hint_command"),
    "explain": ("explain", "explain_command"),
    "server": ("server", "server_command"),
    "nbgrader-course": ("classes", "course_command"),
    "batch": ("classes", "batch_command"),
    "merge": ("classes", "merge_command"),
    "class-report": ("classes", "class_report_command"),
    "gradescope-autograder": ("classes", "autograder_command"),
    "sample-class": ("classes", "sample_class_command"),
}
