"""The third edition's Transformer decoder: ``call(target, source, source_mask)``, causal self-attention."""

from __future__ import annotations

from ..spec import Exercise, Notebook

VISIBLE_TEST = '''\
import numpy as np

layer = TransformerDecoder(8, 16, 2)
target = np.zeros((2, 4, 8), dtype="float32")
source = np.zeros((2, 6, 8), dtype="float32")
source_mask = np.array([[True] * 6, [True, True, True, True, False, False]])
output = layer(target, source, source_mask)
assert tuple(output.shape) == (2, 4, 8), f"expected (2, 4, 8), got {tuple(output.shape)}"
'''

EXERCISE = Exercise(
    id="ch15_decoder",
    edition="3",
    position=3,
    parts=("attention", "feed-forward", "norm", "residual", "causal", "cross-attention"),
    title="The Transformer decoder",
    target="TransformerDecoder",
    notebook=Notebook(visible_test=VISIBLE_TEST),
)
