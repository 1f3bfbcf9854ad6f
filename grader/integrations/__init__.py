"""Where classes already grade: batches, nbgrader, Gradescope, PrairieLearn, and the class report."""
