"""Confinement: the grading child process and its limits, none of which needs TensorFlow.

The parent side (``process``: start a child, feed it, wait for it, read its evidence; ``cgroups``;
``forkserver`` and the servers' loop, ``forkloop``) and what the child applies to itself before the
student's code loads (``confine``: namespaces, privileges and limits, Landlock, seccomp, the reaper),
through the Linux calls in ``kernel``."""
