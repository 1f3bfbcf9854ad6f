"""The student's tools: the workspace ``grade init`` writes, hints, and the progress a machine remembers."""
