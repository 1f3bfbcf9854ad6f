"""Exercise 4, the Transformer decoder: causal self-attention, then attention to the encoder's outputs."""

from __future__ import annotations

from ..spec import Exercise, Notebook

VISIBLE_TEST = '''\
import numpy as np

layer = TransformerDecoder(8, 16, 2)
output = layer(np.zeros((2, 4, 8), dtype="float32"), np.zeros((2, 6, 8), dtype="float32"))
assert tuple(output.shape) == (2, 4, 8), f"expected (2, 4, 8), got {tuple(output.shape)}"
'''

EXERCISE = Exercise(
    id="exercise4",
    position=4,
    parts=("attention", "feed-forward", "norm", "residual", "causal", "cross-attention"),
    title="The Transformer decoder",
    target="TransformerDecoder",
    notebook=Notebook(
        visible_test=VISIBLE_TEST,
    ),
)
