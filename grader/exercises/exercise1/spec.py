"""Exercise 1, the positional embedding: token embedding + position embedding, mask = tokens != 0."""

from __future__ import annotations

from ..spec import Exercise, Notebook

VISIBLE_TEST = '''\
import numpy as np

layer = PositionalEmbedding(10, 50, 8)
tokens = np.array([[3, 7, 2, 0, 0], [5, 1, 4, 9, 8]], dtype="int32")
output = layer(tokens)
assert tuple(output.shape) == (2, 5, 8), f"expected (2, 5, 8), got {tuple(output.shape)}"
mask = layer.compute_mask(tokens)
assert mask is not None and tuple(mask.shape) == (2, 5), "compute_mask should return a (batch, seq) mask"
'''

EXERCISE = Exercise(
    id="exercise1",
    position=1,
    parts=("embedding",),
    title="Positional embedding",
    target="PositionalEmbedding",
    notebook=Notebook(
        visible_test=VISIBLE_TEST,
    ),
)
