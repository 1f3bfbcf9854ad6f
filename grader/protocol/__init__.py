"""The contract between the grader and its grading child: the job, the evidence records and their wire form.

Imported by both sides; nothing here imports TensorFlow."""
