"""The numbers the parent draws for the third edition's decoder: exercise 4's (targets and encoder
outputs of several lengths, the targets changed after a position), with every target position
real. The third edition's decoder takes no target padding mask: its self-attention is causal only,
and the padding of the target is left to the loss (the book's ``weighted_metrics``)."""

from __future__ import annotations

import numpy as np

from ...protocol.job import layer_job
from ..exercise4 import job as second_edition

DIMS = {"hidden_dim": 8, "intermediate_dim": 16, "num_heads": 2}
ROLES = {"embed_dim": DIMS["hidden_dim"], "dense_dim": DIMS["intermediate_dim"], "num_heads": DIMS["num_heads"]}
KEY_DIM = DIMS["hidden_dim"] // DIMS["num_heads"]


def public() -> dict:
    e, batch = ROLES["embed_dim"], second_edition.BATCH
    return layer_job(ROLES, [batch, second_edition.TARGET, e], constructor_arguments=DIMS,
                     encoder_shape=[batch, second_edition.SOURCE, e],
                     lengths={name: list(pair) for name, pair in second_edition.LENGTHS.items()})


def secret(rng: np.random.Generator, seed: int) -> dict:
    secret = second_edition.secret(rng, seed)
    for key in [key for key in secret if key.endswith("target_mask")]:
        secret[key] = np.ones_like(secret[key], dtype=bool)
    return secret
