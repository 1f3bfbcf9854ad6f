"""Exercise 2, the self-attention block: norm(x + attention(x, x)) with a padding mask."""

from __future__ import annotations

from ..spec import Exercise, Notebook

VISIBLE_TEST = '''\
import numpy as np

layer = SelfAttentionBlock(8, 2)
output = layer(np.zeros((2, 5, 8), dtype="float32"))
assert tuple(output.shape) == (2, 5, 8), f"expected (2, 5, 8), got {tuple(output.shape)}"
'''

EXERCISE = Exercise(
    id="exercise2",
    position=2,
    parts=("attention", "norm", "residual"),
    title="A self-attention block",
    target="SelfAttentionBlock",
    notebook=Notebook(
        visible_test=VISIBLE_TEST,
    ),
)
