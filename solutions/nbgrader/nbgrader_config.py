"""nbgrader configuration of the Transformer chapter course (written by `grade nbgrader-course`)."""

import os

# TensorFlow and Keras write to stderr (C++ logs, CUDA probing, warnings), and nbgrader gives
# 0 points to a test cell with any stderr output. For the kernels nbgrader starts:
# - no TensorFlow C++ logs, and no oneDNN notice;
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
os.environ["TF_ENABLE_ONEDNN_OPTS"] = "0"
# - no Python warnings (a real error is an exception, and still fails its cell);
os.environ["PYTHONWARNINGS"] = "ignore"

c = get_config()  # noqa: F821  (nbgrader provides get_config)
c.CourseDirectory.course_id = "transformer-chapter"
c.CourseDirectory.db_assignments = [{'name': 'exercise1'}, {'name': 'exercise2'}, {'name': 'exercise3'}, {'name': 'exercise4'}, {'name': 'exercise5'}]
# - and the kernel's own file descriptors (where C++ logs that ignore the settings above land)
#   are not copied into cell outputs.
c.Execute.extra_arguments = ["--IPKernelApp.capture_fd_output=False"]
# Importing TensorFlow takes seconds; the first hidden test grades the whole answer.
c.Execute.timeout = 300
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
