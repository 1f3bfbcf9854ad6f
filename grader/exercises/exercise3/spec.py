"""Exercise 3, the Transformer encoder, with its two LayerNormalization layers."""

from __future__ import annotations

from ..spec import Exercise, Notebook, WrittenAnswer

VISIBLE_TEST = '''\
import numpy as np

layer = TransformerEncoder(8, 16, 2)
output = layer(np.zeros((2, 5, 8), dtype="float32"))
assert tuple(output.shape) == (2, 5, 8), f"expected (2, 5, 8), got {tuple(output.shape)}"
'''

WRITTEN_ANSWER = WrittenAnswer(
    grade_id="exercise3-why-two-norms",
    points=2.0,
    question="""\
## A written answer (graded by hand)

The encoder creates two `LayerNormalization` layers with identical arguments. Why
not create one and call it twice? Answer in a few sentences in the cell below.

If your course gives you the `grade` command, `grade explain exercise3 --submission
exercise3.ipynb` backs an answer with measurements: it trains a small classifier around
your encoder with two norms and with one shared norm, and reports for each claim whether
the numbers support it.
""",
    model_answer_file="exercise3_written.md",
)

EXERCISE = Exercise(
    id="exercise3",
    position=3,
    parts=("attention", "feed-forward", "norm", "residual"),
    title="The Transformer encoder",
    step_before_next="`grade explain exercise3` measures, on your encoder, why it needs two LayerNormalization layers",
    target="TransformerEncoder",
    notebook=Notebook(
        visible_test=VISIBLE_TEST,
        wording=(
            ("Write down your answer;",
             "Write your answer in the cell at the end of this notebook;"),
            ("Then test your answer by measurement: `grade explain exercise3` (add\n"
             "`--submission exercise3.ipynb` for a notebook) trains",
             "If your course gives you the grader's command line, its explain command, run on this\n"
             "notebook, tests your answer by measurement: it trains"),
        ),
        written_answer=WRITTEN_ANSWER,
    ),
)
