"""The third edition's Transformer encoder: ``call(source, source_mask)``, two LayerNormalization layers."""

from __future__ import annotations

from ..spec import Exercise, Notebook

VISIBLE_TEST = '''\
import numpy as np

layer = TransformerEncoder(8, 16, 2)
source = np.zeros((2, 5, 8), dtype="float32")
source_mask = np.array([[True] * 5, [True, True, True, False, False]])
output = layer(source, source_mask)
assert tuple(output.shape) == (2, 5, 8), f"expected (2, 5, 8), got {tuple(output.shape)}"
'''

EXERCISE = Exercise(
    id="ch15_encoder",
    edition="3",
    position=2,
    parts=("attention", "feed-forward", "norm", "residual"),
    title="The Transformer encoder",
    target="TransformerEncoder",
    notebook=Notebook(visible_test=VISIBLE_TEST),
)
