"""The numbers the parent draws for exercise 3: a padded sequence, and a loss over the outputs."""

from __future__ import annotations

import numpy as np

from ...protocol.job import layer_job, sequence_inputs

DIMS = {"embed_dim": 8, "dense_dim": 16, "num_heads": 2}
BATCH, SEQUENCE = 3, 6


def public() -> dict:
    return layer_job(DIMS, [BATCH, SEQUENCE, DIMS["embed_dim"]])


def secret(rng: np.random.Generator, seed: int) -> dict:
    return sequence_inputs(rng, BATCH, SEQUENCE, DIMS["embed_dim"])
