"""The numbers the parent draws for exercise 5: a small synthetic classification task and a
row to put at the padding (which a masked model never sees)."""

from __future__ import annotations

import numpy as np

from ...protocol.job import normal
from ..tasks import contains_token_task

DIMS = {"vocab_size": 40, "sequence_length": 12, "embed_dim": 16, "dense_dim": 32, "num_heads": 2}
BATCH = 8


def public() -> dict:
    return {"dims": DIMS, "constructor_arguments": DIMS, "input_shape": [BATCH, DIMS["sequence_length"]],
            "training_steps": 15}


def secret(rng: np.random.Generator, seed: int) -> dict:
    tokens, labels = contains_token_task(int(rng.integers(0, 2 ** 31)), vocab_size=DIMS["vocab_size"],
                                         sequence_length=DIMS["sequence_length"], count=BATCH)
    return {"tokens": tokens, "labels": labels, "padding_row": normal(rng, (DIMS["embed_dim"],), 3.0)}
