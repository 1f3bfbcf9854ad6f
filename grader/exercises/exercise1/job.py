"""The numbers the parent draws for exercise 1: token ids with padding, and a loss over the outputs."""

from __future__ import annotations

import numpy as np

from ...protocol.job import layer_job, normal, padding

DIMS = {"sequence_length": 10, "input_dim": 50, "output_dim": 8}
BATCH, TOKENS = 3, 7


def public() -> dict:
    return layer_job(DIMS, [BATCH, TOKENS])


def secret(rng: np.random.Generator, seed: int) -> dict:
    mask = padding(rng, BATCH, TOKENS)
    tokens = np.where(mask, rng.integers(1, DIMS["input_dim"], size=mask.shape), 0).astype(np.int32)
    return {"tokens": tokens, "mask": mask, "loss_weights": normal(rng, (BATCH, TOKENS, DIMS["output_dim"]))}
