"""The third edition's positional embedding: token embedding + position embedding, no mask of its own."""

from __future__ import annotations

from ..spec import Exercise, Notebook

VISIBLE_TEST = '''\
import numpy as np

layer = PositionalEmbedding(10, 50, 8)
tokens = np.array([[3, 7, 2, 0, 0], [5, 1, 4, 9, 8]], dtype="int32")
output = layer(tokens)
assert tuple(output.shape) == (2, 5, 8), f"expected (2, 5, 8), got {tuple(output.shape)}"
'''

EXERCISE = Exercise(
    id="ch15_embedding",
    edition="3",
    position=1,
    parts=("embedding",),
    title="Positional embedding",
    target="PositionalEmbedding",
    notebook=Notebook(visible_test=VISIBLE_TEST),
)
